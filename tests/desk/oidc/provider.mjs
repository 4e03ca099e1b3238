// An OpenID provider for the desk's single sign-on tests, on 127.0.0.1 only.
//
// node provider.mjs  reads its configuration as JSON on stdin:
//   {"clients": [...], "accounts": {"id": {"tenant": "acme", "roles": [...]}},
//    "idTokenTtl": 3600}
// binds a port of 127.0.0.1 the system chooses, and prints one line,
// {"issuer": "http://127.0.0.1:<port>"}, once it listens (binding first means no other process
// can take the port between choosing and listening). Logins use the provider's development
// interactions: any account id with any password, then consent.
import { createServer } from "node:http";
import { Provider } from "oidc-provider";

const chunks = [];
for await (const chunk of process.stdin) chunks.push(chunk);
const config = JSON.parse(Buffer.concat(chunks).toString("utf8"));

const server = createServer();
await new Promise((resolve, reject) => {
  server.once("error", reject);
  server.listen(0, "127.0.0.1", resolve);
});
const issuer = `http://127.0.0.1:${server.address().port}`;
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
server.on("request", provider.callback());
process.stdout.write(JSON.stringify({ issuer }) + "\n");
