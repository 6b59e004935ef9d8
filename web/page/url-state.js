// The state in the URL: the hash holds [flag, value] pairs (#text=...&variant=...; the keys are the desktop
// app's flags), the module says which differ from the defaults. The URL follows every change, and the page
// follows the URL (Back, Forward, an edited hash).
import { call, started, wellFormed } from './module.js';
import { askForWanted, ensureVocab } from './model-files.js';

const hashPairs = () => Array.from(new URLSearchParams(location.hash.slice(1)).entries(),
                                          ([k, v]) => [wellFormed(k), wellFormed(v)]);
const pairsHash = (pairs) => (pairs.length ? '#' + new URLSearchParams(pairs).toString() : '');
const PAUSE_MS = 1000;  // changes closer together than this (typing) make one history entry
let firstState = true, lastChange = -Infinity, followingLink = false;

export function stateChanged(json) {
  const hash = pairsHash(JSON.parse(json));
  const now = performance.now();
  const burst = now - lastChange < PAUSE_MS;
  const first = firstState;
  firstState = false;
  if (!first) lastChange = now;  // the link the page opened with is not an edit
  if (hash === location.hash) return;
  const url = location.pathname + location.search + hash;
  // A link being followed (Back, Forward, an edited hash) is rewritten in place: no new history entry.
  if (first || burst || followingLink) history.replaceState(null, '', url);
  else history.pushState(null, '', url);
}
// A link that names a model needs GPT-2's vocabulary before the module applies it.
export const linkNamesModel = () => hashPairs().some(([k]) => k === 'model');

// The link the module started with (its hook initialState), as JSON pairs.
let appliedHash = null;
export function initialState() {
  appliedHash = location.hash;
  return JSON.stringify(hashPairs());
}

// Follows the URL's hash (Back, Forward, an edited hash): the module applies it, or says why not.
async function followHash() {
  if (linkNamesModel()) await ensureVocab().catch(() => {});
  appliedHash = location.hash;
  followingLink = true;
  try {
    const error = call('attnviz_apply_state', JSON.stringify(hashPairs()));
    if (error) console.warn('attnviz: ' + error);
  } finally {
    followingLink = false;
  }
  askForWanted();
}
window.addEventListener('popstate', () => {
  if (started) followHash();  // before ready, the first view follows it (firstHeatmap)
});
// The hash moved while the page loaded: followed once the frame that made the first view is over.
export function followIfMoved() {
  if (location.hash !== appliedHash) setTimeout(followHash, 0);
}
