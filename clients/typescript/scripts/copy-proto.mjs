// Copies the service's .proto files into the package so that an installed
// copy loads them without the rest of the repository. The repo's proto/ is
// the single source of truth; the copy under dist/ is rebuilt on every build.
import { cpSync, existsSync, mkdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const pkg = join(dirname(fileURLToPath(import.meta.url)), '..');
const from = join(pkg, '..', '..', 'proto', 'mcp', 'tasks', 'v1');
const to = join(pkg, 'dist', 'proto', 'mcp', 'tasks', 'v1');

if (!existsSync(from)) {
  // Installed outside the repository: dist/proto must already be there.
  if (existsSync(to)) process.exit(0);
  console.error(`copy-proto: ${from} not found and no prebuilt ${to}`);
  process.exit(1);
}
mkdirSync(to, { recursive: true });
cpSync(from, to, { recursive: true });
