// An OpenID provider for the desk's single sign-on tests, on 127.0.0.1 only.
//
// node provider.mjs  reads its configuration as JSON on stdin:
//   {"port": 8123, "clients": [...], "accounts": {"id": {"tenant": "acme", "roles": [...]}},
//    "idTokenTtl": 3600}
// and prints one line, {"issuer": "http://127.0.0.1:<port>"}, once it listens. Logins use the
// provider's development interactions: any account id with any password, then consent.
import { Provider } from "oidc-provider";

const chunks = [];
for await (const chunk of process.stdin) chunks.push(chunk);
const config = JSON.parse(Buffer.concat(chunks).toString("utf8"));

const port = config.port;
const issuer = `http://127.0.0.1:${port}`;
const provider = new Provider(issuer, {
  clients: config.clients,
  claims: { openid: ["sub"], effectledger: ["tenant", "roles"] },
  scopes: ["openid", "effectledger"],
  conformIdTokenClaims: false,
  findAccount: async (ctx, id) => ({
    accountId: id,
    claims: async () => ({ sub: id, ...(config.accounts[id] || {}) }),
  }),
  features: { devInteractions: { enabled: true } },
  pkce: { required: () => true },
  ttl: { IdToken: config.idTokenTtl || 3600, AccessToken: 600, AuthorizationCode: 60 },
  cookies: { keys: ["effectledger-test-only"] },
});
provider.listen(port, "127.0.0.1", () => {
  process.stdout.write(JSON.stringify({ issuer }) + "\n");
});
