// An Express shop for origins_test.go: one protected route,
// /products/:product/…, and a public catch-all, each answering with what it
// served ("product <product>" or "public") and echoing the request target and
// the X-Flashgate-Product header it got (X-Origin-Target, X-Origin-Verified).
// Express's router matches the path as received: it neither decodes %2F nor
// removes dot segments, and it ignores case. Listens on 127.0.0.1, a free
// port, printed as "listening <port>".
const express = require("express");

const app = express();
const echo = (req, res) => {
  res.set("X-Origin-Target", req.originalUrl);
  res.set("X-Origin-Verified", req.get("X-Flashgate-Product") ?? "");
};
app.get(["/products/:product", "/products/:product/*rest"], (req, res) => {
  echo(req, res);
  res.type("text/plain").send(`product ${req.params.product}\n`);
});
app.use((req, res) => {
  echo(req, res);
  res.type("text/plain").send("public\n");
});
// A parameter Express cannot decode (a stray %) is a 400 from Express.
app.use((err, req, res, next) => {
  echo(req, res);
  res.status(err.status ?? 500).type("text/plain").send(`error ${err.status ?? 500}\n`);
});

const server = app.listen(0, "127.0.0.1", () => console.log(`listening ${server.address().port}`));
