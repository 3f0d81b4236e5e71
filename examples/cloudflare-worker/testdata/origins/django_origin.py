"""A Django shop for origins_test.go (examples/cloudflare-worker).

One protected route, products/<str:product>/..., and a public catch-all,
each answering with what it served ("product <product>" or "public") and
echoing the X-Flashgate-Product header it got (X-Origin-Verified). Django
routes PATH_INFO, which its server decodes (%2F included), and does not
remove dot segments. Served by Django's own threaded development server
(django.core.servers.basehttp) on 127.0.0.1, a free port, printed as
"listening <port>".
"""
import sys

from django.conf import settings

settings.configure(
    DEBUG=False,
    ROOT_URLCONF=__name__,
    ALLOWED_HOSTS=["*"],
    SECRET_KEY="flashgate-test-origin",
    MIDDLEWARE=[],
    USE_TZ=True,
)

import django  # noqa: E402

django.setup()

from django.core.servers.basehttp import ThreadedWSGIServer, WSGIRequestHandler  # noqa: E402
from django.core.wsgi import get_wsgi_application  # noqa: E402
from django.http import HttpResponse  # noqa: E402
from django.urls import path, re_path  # noqa: E402


def answer(request, text):
    res = HttpResponse(text + "\n", content_type="text/plain")
    res["X-Origin-Verified"] = request.headers.get("X-Flashgate-Product", "")
    return res


def product(request, product, rest=""):
    return answer(request, "product " + product)


def public(request):
    return answer(request, "public")


urlpatterns = [
    path("products/<str:product>", product),
    path("products/<str:product>/", product),
    path("products/<str:product>/<path:rest>", product),
    re_path(r"", public),
]


class QuietHandler(WSGIRequestHandler):
    def log_message(self, *args):
        pass


if __name__ == "__main__":
    server = ThreadedWSGIServer(("127.0.0.1", 0), QuietHandler)
    server.set_app(get_wsgi_application())
    print("listening %d" % server.server_port, flush=True)
    server.serve_forever()
