// altcha_compat.mjs: flashgate's proof of work against ALTCHA's own library
// (altcha-lib, the classic SHA-256 format its widget solves), for
// pow_test.go's TestALTCHACompat.
//
//   node altcha_compat.mjs solve '<challenge JSON>'
//     solves a flashgate challenge with altcha-lib's solveChallenge and
//     prints the payload as the widget submits it (base64 JSON);
//   node altcha_compat.mjs verify-client
//     creates a challenge with altcha-lib's createChallenge, solves it with
//     flashgate-client.js's solvePoW and prints {"ok": verifySolution(…)}.
import { createChallenge, solveChallenge, verifySolution } from "altcha-lib";
import { solvePoW } from "../../server/page/flashgate-client.js";

const [op, arg] = process.argv.slice(2);
if (op === "solve") {
  const ch = JSON.parse(arg);
  const sol = await solveChallenge(ch.challenge, ch.salt, ch.algorithm, ch.maxnumber).promise;
  if (!sol) throw new Error("altcha-lib found no solution");
  const { algorithm, challenge, salt, signature } = ch;
  process.stdout.write(btoa(JSON.stringify({ algorithm, challenge, number: sol.number, salt, signature, took: sol.took })) + "\n");
} else if (op === "verify-client") {
  const hmacKey = "flashgate compat key";
  const ch = await createChallenge({ hmacKey, maxnumber: 5000, expires: new Date(Date.now() + 600_000), params: { v: "x" } });
  const payload = await solvePoW(ch);
  const wrong = btoa(JSON.stringify({ ...JSON.parse(atob(payload)), number: JSON.parse(atob(payload)).number + 1 }));
  process.stdout.write(
    JSON.stringify({ ok: await verifySolution(payload, hmacKey), wrongRefused: !(await verifySolution(wrong, hmacKey)), salt: ch.salt }) + "\n",
  );
} else {
  throw new Error("usage: node altcha_compat.mjs solve <challenge JSON> | verify-client");
}
