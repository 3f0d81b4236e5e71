// Compiled (not run) by TestTypeDeclarations with tsc --strict: the README's
// uses of the package must type-check against index.d.ts, and misuse must not.
import { Verifier, VerifierError, REASONS, PROBLEMS, refusal, hostCryptoAvailable, type Claims, type Reason, type VerifyResult } from "../../index.js";
import { verifyReceipt, ReceiptError, RECEIPT_REASONS, type ReceiptResult, type ReceiptReason } from "../../index.js";

export async function worker(request: Request, wasm: WebAssembly.Module): Promise<Response> {
  const v: Verifier = await Verifier.create({ wasm, jwksUrl: "https://queue.example.com/.well-known/jwks.json", issuer: "https://queue.example.com", audience: "orders" });
  const r: VerifyResult = await v.verify(request.headers.get("authorization")?.slice(7) ?? "", { product: "drop-42", now: Date.now() });
  if (!r.valid) {
    const reason: Exclude<Reason, "ok"> = r.reason;
    const message: string = r.message;
    return refusal(reason, message.length > 0 ? undefined : "refused");
  }
  const c: Claims = r.claims;
  const n: number = c.exp - c.iat;
  return new Response(`${c.sub} ${c.product} ${c.jti} ${c.kid} ${n}`);
}

export async function options(): Promise<void> {
  const v = await Verifier.create({
    jwks: { keys: [] }, issuer: "i", audience: "a", product: "p", leewaySeconds: 5, maxLifetimeSeconds: 900,
    crypto: "pure", minRefreshIntervalMs: 1000, maxKeysAgeMs: 60_000, fetchTimeoutMs: 100, clock: () => 0,
  });
  const mode: "host" | "pure" = v.crypto;
  const provider: "node:crypto" | "webcrypto" | "subtle" | "wasm" = v.provider;
  const err: Error | null = v.keysError;
  const fetches: number = v.keysFetches;
  v.setKeys('{"keys":[]}');
  await v.refreshKeys();
  await v.verify("t", { now: new Date(), user: "u" });
  const ok: boolean = await hostCryptoAvailable();
  const first: Reason | undefined = REASONS[0];
  const status: number = PROBLEMS.keys_unavailable.status + PROBLEMS.missing.retryAfter;
  try {
    await Verifier.create({ jwks: "{}", issuer: "i", audience: "a" });
  } catch (e) {
    if (e instanceof VerifierError) console.log(e.code, mode, provider, err, fetches, ok, first, status);
  }
}

export async function misuse(v: Verifier): Promise<void> {
  // @ts-expect-error issuer and audience are required
  await Verifier.create({ jwks: "{}" });
  // @ts-expect-error crypto is "auto", "host" or "pure"
  await Verifier.create({ jwks: "{}", issuer: "i", audience: "a", crypto: "fast" });
  // @ts-expect-error now is a Date or milliseconds, not a string
  await v.verify("t", { now: "2026-11-22" });
  const r = await v.verify("t");
  // @ts-expect-error claims exist only on a valid result
  console.log(r.claims.sub);
  // @ts-expect-error "ok" is not a refusal
  refusal("ok");
}

// A third party's checker page: a receipt file and the issuer's public documents.
export async function checkReceipt(receipt: string): Promise<string> {
  try {
    const r: ReceiptResult = await verifyReceipt(receipt, {
      jwks: "https://queue.example.com/.well-known/jwks.json",
      roomView: "https://queue.example.com/v1/rooms/drop-42",
    });
    return `${r.user} arrived ${r.arrival}, drawn place ${r.place} of ${r.cutoff}`;
  } catch (err) {
    if (err instanceof ReceiptError) {
      const why: ReceiptReason = err.reason;
      return RECEIPT_REASONS.includes(why) ? why : "unknown";
    }
    throw err;
  }
}
