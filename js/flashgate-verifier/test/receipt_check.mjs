// Driver of TestNodeVerifyReceipt (receipt_test.go): reads the fixture the
// Go test wrote (RECEIPT_FIXTURE: a live issuer's URL, receipts signed
// before the draw, and receipts it must refuse), checks each with
// verifyReceipt and prints one JSON object {places, reasons} for the Go
// test to compare with the issuer's own answers.
import { readFile } from "node:fs/promises";
import { verifyReceipt, ReceiptError, RECEIPT_REASONS } from "../index.js";

const fx = JSON.parse(await readFile(process.env.RECEIPT_FIXTURE, "utf8"));
const jwksUrl = `${fx.base}/.well-known/jwks.json`;
const viewUrl = `${fx.base}/v1/rooms/${encodeURIComponent(fx.room)}`;
const view = await (await fetch(viewUrl)).json();

const places = {};
for (const [user, receipt] of Object.entries(fx.receipts)) {
  const r = await verifyReceipt(receipt, { jwks: jwksUrl, roomView: viewUrl }); // the URL form
  if (r.user !== user || r.room !== fx.room) throw new Error(`${user}: claims ${JSON.stringify(r)}`);
  places[user] = r.place;
}

async function reason(receipt, opts) {
  try {
    await verifyReceipt(receipt, opts);
    return "ok";
  } catch (err) {
    if (!(err instanceof ReceiptError) || !RECEIPT_REASONS.includes(err.reason)) throw err;
    return err.reason;
  }
}
const jwks = await (await fetch(jwksUrl)).json(); // the object form
const first = Object.values(fx.receipts)[0];
const changed = { ...view, lottery: { ...view.lottery, seed: "0".repeat(32) } };
const reasons = {
  before: await reason(first, { jwks, roomView: fx.before_view }), // JSON text
  changed_seed: await reason(first, { jwks, roomView: changed }),
  forged: await reason(fx.forged, { jwks, roomView: view }),
  tampered: await reason(fx.tampered, { jwks, roomView: view }),
  admission_token: await reason(fx.admission_token, { jwks, roomView: view }),
  other_room: await reason(fx.other_room, { jwks, roomView: view }),
  late: await reason(fx.late, { jwks, roomView: view }),
  no_view: await reason(first, { jwks, roomView: `${fx.base}/v1/rooms/no-such-room` }),
};
console.log(JSON.stringify({ places, reasons }));
