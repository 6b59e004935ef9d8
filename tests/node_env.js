// ATTNVIZ_* variables of node's environment, for getenv in the WebAssembly test binary (Emscripten's getenv
// reads only its own ENV).
Module['preRun'] = (Module['preRun'] || []).concat(function () {
  for (const name of Object.keys(process.env)) if (name.startsWith('ATTNVIZ_')) ENV[name] = process.env[name];
});
