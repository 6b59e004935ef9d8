// What the page-against-a-peer benchmarks share (model_peer.mjs, threads_page.mjs): their flags, where the peer's
// files are, the median, the load average, and how many passes a round times at each T.
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { repo } from '../tests/harness.mjs';

export const args = process.argv.slice(2);
export const opt = (name, fallback) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : fallback;
};
export const quick = args.includes('--quick');
export const Ts = opt('--T', '16,128,512').split(',').map(Number);
export const rounds = Number(opt('--rounds', quick ? '2' : '5'));
export const models = opt('--models', join(repo, 'build', 'bench'));
export const ortDist = join(repo, 'web', 'node_modules', 'onnxruntime-web', 'dist');
export const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) >> 1] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};
export const load = () => loadavg().map((x) => x.toFixed(2)).join(' ');
export const runsPerRound = (T) => (T <= 32 ? 5 : T <= 128 ? 2 : 1);
