// An OIDC identity provider for the single sign-on cases, on its own port
// and reached as `localhost` (another site than the dashboard's 127.0.0.1,
// so the browser applies its cross-site cookie rules as it would in
// production). Its login page lets the test pick who logs in; its token
// endpoint checks the code (once), the PKCE verifier, the redirect URI and
// the client before it signs an ES256 access token with the tenant and role.
//
// Usage: node issuer.mjs PORTFILE — writes the port it listens on to
// PORTFILE, serves until killed.
import http from 'node:http';
import { createHash, generateKeyPairSync, randomBytes, sign } from 'node:crypto';
import { writeFileSync } from 'node:fs';

export const CLIENT_ID = 'dashboard';
export const AUDIENCE = 'taskstore';
/** Who may be picked on the login page: label -> claims. */
const IDENTITIES = {
  'a client': { sub: 'alice', tenant: 'a', role: 'client' },
  'a viewer': { sub: 'victor', tenant: 'a', role: 'viewer' },
  'a worker': { sub: 'wendy', tenant: 'a', role: 'worker' },
  operator: { sub: 'olga', tenant: '*', role: 'admin' },
};

const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
const jwk = { ...publicKey.export({ format: 'jwk' }), kid: 'browser-issuer-1', alg: 'ES256', use: 'sig' };
const codes = new Map(); // code -> {challenge, redirectUri, claims}
const b64url = (buf) => Buffer.from(buf).toString('base64url');
const escape = (s) => String(s).replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

function token(issuer, claims) {
  const now = Math.floor(Date.now() / 1000);
  const header = b64url(JSON.stringify({ alg: 'ES256', typ: 'JWT', kid: jwk.kid }));
  const body = b64url(JSON.stringify({ iss: issuer, aud: AUDIENCE, exp: now + 600, nbf: now - 5, iat: now, ...claims }));
  const signature = sign('sha256', Buffer.from(`${header}.${body}`), { key: privateKey, dsaEncoding: 'ieee-p1363' });
  return `${header}.${body}.${b64url(signature)}`;
}

async function form(req) {
  let raw = '';
  for await (const chunk of req) raw += chunk;
  return new URLSearchParams(raw);
}

function json(res, status, value) {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify(value));
}

const server = http.createServer(async (req, res) => {
  const issuer = `http://localhost:${server.address().port}`;
  const u = new URL(req.url, issuer);
  if (u.pathname === '/.well-known/openid-configuration') {
    return json(res, 200, {
      issuer,
      authorization_endpoint: `${issuer}/authorize`,
      token_endpoint: `${issuer}/token`,
      jwks_uri: `${issuer}/jwks`,
      code_challenge_methods_supported: ['S256'],
    });
  }
  if (u.pathname === '/jwks') return json(res, 200, { keys: [jwk] });
  if (u.pathname === '/authorize' && req.method === 'GET') {
    const q = u.searchParams;
    if (q.get('client_id') !== CLIENT_ID || q.get('response_type') !== 'code' || q.get('code_challenge_method') !== 'S256') {
      res.writeHead(400);
      return res.end('not an authorization request of ours');
    }
    const hidden = ['state', 'redirect_uri', 'code_challenge']
      .map((n) => `<input type="hidden" name="${n}" value="${escape(q.get(n) ?? '')}">`).join('');
    const options = Object.keys(IDENTITIES).map((l) => `<option>${escape(l)}</option>`).join('');
    res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
    return res.end(`<!doctype html><html lang="en"><link rel="icon" href="data:,"><title>Test identity provider</title>
<main><h1>Test identity provider</h1><form method="post" action="/authorize">${hidden}
<label>Who <select name="identity">${options}</select></label>
<button type="submit">Continue</button></form></main></html>`);
  }
  if (u.pathname === '/authorize' && req.method === 'POST') {
    const f = await form(req);
    const claims = IDENTITIES[f.get('identity')];
    const code = b64url(randomBytes(16));
    codes.set(code, { challenge: f.get('code_challenge'), redirectUri: f.get('redirect_uri'), claims });
    const back = new URL(f.get('redirect_uri'));
    back.searchParams.set('code', code);
    back.searchParams.set('state', f.get('state'));
    res.writeHead(303, { location: back.href });
    return res.end();
  }
  if (u.pathname === '/token' && req.method === 'POST') {
    const f = await form(req);
    const grant = codes.get(f.get('code') ?? '');
    codes.delete(f.get('code') ?? '');
    const verified = b64url(createHash('sha256').update(f.get('code_verifier') ?? '').digest());
    if (!grant || f.get('client_id') !== CLIENT_ID || verified !== grant.challenge || f.get('redirect_uri') !== grant.redirectUri) {
      return json(res, 400, { error: 'invalid_grant' });
    }
    return json(res, 200, { access_token: token(issuer, grant.claims), token_type: 'Bearer', expires_in: 600 });
  }
  res.writeHead(404);
  res.end();
});

server.listen(0, '127.0.0.1', () => writeFileSync(process.argv[2], String(server.address().port)));
