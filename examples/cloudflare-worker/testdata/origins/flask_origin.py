"""A Flask shop for origins_test.go (examples/cloudflare-worker).

One protected route, /products/<product>/..., and a public catch-all, each
answering with what it served ("product <product>" or "public") and echoing
the request target and the X-Flashgate-Product header it got (X-Origin-Target,
X-Origin-Verified). Werkzeug decodes the whole path, %2F included, before
routing and does not remove dot segments. Served by Werkzeug's threaded
server on 127.0.0.1, a free port, printed as "listening <port>".
"""
import logging

from flask import Flask, request
from werkzeug.serving import make_server

app = Flask(__name__)


def answer(text):
    return text + "\n", 200, {
        "Content-Type": "text/plain",
        "X-Origin-Target": request.environ.get("REQUEST_URI", ""),
        "X-Origin-Verified": request.headers.get("X-Flashgate-Product", ""),
    }


@app.route("/products/<product>/", defaults={"rest": ""}, strict_slashes=False)
@app.route("/products/<product>/<path:rest>")
def product(product, rest):
    return answer("product " + product)


@app.route("/", defaults={"rest": ""})
@app.route("/<path:rest>")
def public(rest):
    return answer("public")


if __name__ == "__main__":
    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # no request log
    server = make_server("127.0.0.1", 0, app, threaded=True)
    print("listening %d" % server.server_port, flush=True)
    server.serve_forever()
