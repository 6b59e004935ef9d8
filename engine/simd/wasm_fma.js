// The JavaScript half of simd/wasm_fma.cpp, an Emscripten JS library that every WebAssembly build linking the
// engine gets (engine/CMakeLists.txt). It runs on the thread that calls it: each Worker of the threaded module
// has its own instance and function table, so each thread installs the kernels into its own.
mergeInto(LibraryManager.library, {
  // Instantiates the n kernel modules (their bytes in the module's memory: pointers at `bytes`, sizes at
  // `sizes`) on the module's own memory and appends each kernel to the function table; writes their table
  // indices to `out`. Returns 1, or 0 where this engine cannot run them (no relaxed SIMD: WebAssembly.validate
  // refuses the bytes) or anything fails; then nothing is left installed and the engine keeps its own kernels.
  attnviz_wasm_fma_install: function (bytes, sizes, n, out) {
    try {
      var kernels = [];
      // Addresses as unsigned numbers: a module may have up to 4 GB of memory. (Nothing here grows it.)
      var words = new Int32Array(wasmMemory.buffer);
      for (var i = 0; i < n; ++i) {
        var p = words[(bytes >>> 2) + i] >>> 0, len = words[(sizes >>> 2) + i];
        // A copy: WebAssembly.Module takes no view of shared memory.
        var code = new Uint8Array(wasmMemory.buffer, p, len).slice();
        if (!WebAssembly.validate(code)) return 0;
        var module = new WebAssembly.Module(code);
        var imports = WebAssembly.Module.imports(module);
        if (imports.length != 1 || imports[0].kind != 'memory') return 0;
        kernels.push(new WebAssembly.Instance(module, {env: {memory: wasmMemory}}).exports.k);
      }
      var first = wasmTable.length;
      wasmTable.grow(n);
      for (var j = 0; j < n; ++j) wasmTable.set(first + j, kernels[j]);
      for (var k = 0; k < n; ++k) words[(out >>> 2) + k] = first + k;
      return 1;
    } catch (e) {
      return 0;
    }
  },
});
