// attnviz's WebGPU backend, whole models: GPT-2's forward pass on the GPU, over the layer's kernels
// (gemm.wgsl, attention.wgsl) and four of its own (layernorm.wgsl, gelu.wgsl, residual.wgsl, embedding.wgsl).
// Built into attnviz-gpu.js after the layer's part (web/gpu/embed.cmake), which defines AttnvizGpu.
//
//   const ms = await gpu.runModel(job, fetchRows, sink);
//
// A job (sizes in floats, matrices row-major as nn.Linear holds them, (out, in)):
//   T, d, heads, layers, vocab, weightsId, ids (Int32Array, T), eps,
//   mats: [[rows, cols], ...] the weights' shapes in the order below ([0, 0]: absent),
//   keep: per layer, null or {weights, scores, scaled, inputs, q, k, v, context, output, residIn, residOut}
//         (booleans: what comes back), logits: {first, rows} (the rows [first, first + rows) of the logits).
// Weights are uploaded when weightsId is not the one the GPU holds (or the device or the per-buffer limit
// changed): fetchRows(index, row0, rows) returns those rows of matrix `index` as a Float32Array, valid until
// the next call. Each matrix is split by rows into pieces that fit one storage binding (wte, 154 MB in GPT-2,
// is over WebGPU's default 128 MiB), and every kernel that reads it goes a piece at a time.
// sink(name, layer, data, offset) receives the results while they are mapped (layer -1 for the logits).
// Matrices: 0 wte (vocab, d), 1 wpe (context, d), 2 ln_f scale, 3 ln_f shift, 4 the head when untied
// (vocab, d); then 16 per layer: ln_1 scale, shift, W_query, b, W_key, b, W_value, b, out_proj, b, ln_2
// scale, shift, fc (4d, d), b, proj (d, 4d), b. Vectors are (1, n).
'use strict';

(function () {
  const PER_LAYER = 16;
  const LN1 = 0, WQ = 2, WK = 4, WV = 6, WO = 8, LN2 = 10, FC = 12, PROJ = 14;
  const STAGING_BYTES = 64 << 20;  // read-back gathered per submission (more when one copy is larger)
  const FETCH_BYTES = 16 << 20;    // weights taken from the module per call while uploading
  const MiB = AttnvizGpu.MiB;
  const align16 = (b) => Math.max(16, Math.ceil(b / 16) * 16);

  function matName(i) {
    if (i < 5) return ['wte', 'wpe', 'ln_f.weight', 'ln_f.bias', 'the output head'][i];
    const l = Math.floor((i - 5) / PER_LAYER), k = (i - 5) % PER_LAYER;
    return `h.${l}.` + ['ln_1.weight', 'ln_1.bias', 'W_query', 'W_query.bias', 'W_key', 'W_key.bias', 'W_value',
                        'W_value.bias', 'out_proj', 'out_proj.bias', 'ln_2.weight', 'ln_2.bias', 'mlp.c_fc',
                        'mlp.c_fc.bias', 'mlp.c_proj', 'mlp.c_proj.bias'][k];
  }

  Object.assign(AttnvizGpu.prototype, {
    runModel(job, fetchRows, sink) {
      const next = this.queue.then(() => this.runModelNow(job, fetchRows, sink));
      this.queue = next.catch(() => {});
      return next;
    },

    // The model kernels' pipelines, made once per device.
    async modelPipelines() {
      if (this.modelPipes && this.modelPipes.device === this.device) return this.modelPipes;
      const device = this.device;
      const make = async (name) => device.createComputePipelineAsync(
          { layout: 'auto', compute: { module: await AttnvizGpu.compile(device, name), entryPoint: 'main' } });
      const [norm, gelu, residual, embedding] =
          await Promise.all(['layernorm', 'gelu', 'residual', 'embedding'].map(make));
      this.modelPipes = { device, norm, gelu, residual, embedding };
      return this.modelPipes;
    },

    dropModel() {
      if (!this.model) return;
      for (const m of this.model.mats) if (m) for (const p of m.pieces) p.buffer.destroy();
      this.model = null;
    },

    // The weights, unpacked row-major by the module and split by rows to fit `limit` bytes per buffer.
    async uploadModel(job, fetchRows, limit) {
      this.dropModel();
      const device = this.device, q = device.queue;
      const S = GPUBufferUsage.STORAGE, CD = GPUBufferUsage.COPY_DST;
      // Held as it grows, so that a refusal half way frees what was made.
      const model = { id: job.weightsId, device, limit, mats: [] };
      this.model = model;
      device.pushErrorScope('out-of-memory');
      let oom = null;
      try {
        job.mats.forEach(([rows, cols], i) => {
          if (!rows) return model.mats.push(null);
          const rowBytes = cols * 4;
          if (rowBytes > limit)
            throw new Error(`one row of ${matName(i)} needs ${MiB(rowBytes)}, ` +
                            `more than this GPU's ${MiB(limit)} per buffer`);
          const per = Math.floor(limit / rowBytes), slice = Math.max(1, Math.floor(FETCH_BYTES / rowBytes));
          const mat = { rows, cols, pieces: [] };
          model.mats.push(mat);
          for (let row0 = 0; row0 < rows; row0 += per) {
            const n = Math.min(per, rows - row0);
            const buffer = device.createBuffer({ label: `${matName(i)} rows ${row0}+${n}`,
                                                 size: align16(n * rowBytes), usage: S | CD });
            mat.pieces.push({ buffer, row0, rows: n });
            for (let s = 0; s < n; s += slice) {
              const m = Math.min(slice, n - s);
              const data = fetchRows(i, row0 + s, m);
              if (!data || data.length !== m * cols) throw new Error(`the module did not hand over ${matName(i)}`);
              q.writeBuffer(buffer, s * rowBytes, data);
            }
          }
        });
      } catch (e) {
        this.dropModel();
        throw e;
      } finally {
        oom = await device.popErrorScope();
      }
      if (oom) {
        this.dropModel();
        throw new Error('the GPU could not hold the weights: ' + oom.message);
      }
    },

    async runModelNow(job, fetchRows, sink) {
      const t0 = performance.now();
      await this.ensureDevice();
      // A pass the GPU refuses (a validation error) is a failed run: WASM computes it, with the reason.
      const device = this.device;
      device.pushErrorScope('validation');
      let invalid = null;
      try {
        await this.modelPass(job, fetchRows, sink);
      } finally {
        invalid = await device.popErrorScope().catch(() => null);
      }
      if (invalid) throw new Error('the GPU refused this pass: ' + invalid.message);
      return performance.now() - t0;
    },

    async modelPass(job, fetchRows, sink) {
      const device = this.device, q = device.queue;
      const S = GPUBufferUsage.STORAGE, CD = GPUBufferUsage.COPY_DST, CS = GPUBufferUsage.COPY_SRC;
      const pipes = await this.modelPipelines();
      const { T, d, heads: H, layers: L, vocab: V } = job;
      const hd = d / H, limit = this.perBufferBytes();
      AttnvizGpu.checkFits([
        ['the Q, K and V of ' + T + ' tokens', 3 * T * d * 4],
        ["the feed-forward's activations (T x 4d)", T * 4 * d * 4],
        ['the logits kept', job.logits.rows * V * 4],
        ["one head's scores (T x T)", T * T * 4],
      ], limit);
      const m = this.model;
      if (!m || m.id !== job.weightsId || m.device !== device || m.limit !== limit)
        await this.uploadModel(job, fetchRows, limit);
      const W = this.model.mats;
      const layerMat = (l, k) => W[5 + l * PER_LAYER + k];
      const headsPerChunk =
          Math.max(1, Math.min(H, Math.floor(Math.min(limit, AttnvizGpu.CHUNK_BYTES) / (T * T * 4))));

      // Activations: the residual stream x, norm1's output h, Q | K | V, the merged context, out_proj's output,
      // norm2's output, the feed-forward's hidden layer and output, a chunk of heads' (T, T) stages, the logits.
      device.pushErrorScope('out-of-memory');
      const buf = (name, bytes) => this.buffer('model-' + name, bytes, S | CD | CS);
      const ids = buf('ids', T * 4), x = buf('x', T * d * 4), h = buf('h', T * d * 4), qkv = buf('qkv', 3 * T * d * 4);
      const ctx = buf('context', T * d * 4), att = buf('att', T * d * 4), h2 = buf('h2', T * d * 4);
      const ff = buf('ff', T * 4 * d * 4), mlp = buf('mlp', T * d * 4);
      const chunk = headsPerChunk * T * T * 4;
      const sc = buf('scores', chunk), scaled = buf('scaled', chunk), p = buf('weights', chunk);
      const logits = buf('logits', job.logits.rows * V * 4);
      const oom = await device.popErrorScope();
      if (oom) throw new Error('the GPU could not hold this pass: ' + oom.message);
      q.writeBuffer(ids, 0, new Uint32Array(job.ids.buffer, job.ids.byteOffset, T));

      // The pass is recorded as dispatches and read-back copies in order; submit() sends what is recorded
      // (when the copies fill a staging buffer, and at the end) and leaves its mapping to finish later.
      let ops = [], uniforms = [], copied = 0;
      const pending = [], spare = [];
      const slot = (words, floats) => {
        const data = new ArrayBuffer(64);
        new Uint32Array(data).set(words);
        if (floats) new Float32Array(data, 16, floats.length).set(floats);
        uniforms.push(data);
        return (uniforms.length - 1) * 256;
      };
      const dispatch = (pipeline, entries, groups, offset) => ops.push({ pipeline, entries, groups, offset });
      const gemm = (pipeline, a, b, bias, c, g, batch = 1) =>
        dispatch(pipeline, [a, b, bias || this.dummy, c], [Math.ceil(g.N / 64), Math.ceil(g.M / 64), batch],
                 slot([g.M, g.N, g.K, g.lda, g.ldb, g.ldc, g.aOff || 0, g.bOff || 0, g.cOff || 0, g.aBatch || 0,
                       g.bBatch || 0, g.cBatch || 0, g.biasOff || 0, 0, (bias ? 1 : 0) | (g.causal ? 2 : 0), 0]));
      // y (M, out) at cOff (row stride ldc) = a (M, K) at aOff W^T + b, a piece of W at a time.
      const linear = (a, aOff, M, K, w, bias, c, cOff, ldc) => {
        for (const pc of w.pieces)
          gemm(this.gemmT, a, pc.buffer, bias ? bias.pieces[0].buffer : null, c,
               { M, N: pc.rows, K, lda: K, ldb: K, ldc, aOff, cOff: cOff + pc.row0, biasOff: pc.row0 });
      };
      const norm = (src, off, dst, rows, scale, shift) =>
        dispatch(pipes.norm, [src, scale.pieces[0].buffer, shift.pieces[0].buffer, dst], [rows, 1, 1],
                 slot([rows, d, off, off], [job.eps]));
      const spread = (n) => [Math.min(65535, Math.ceil(n / 256)), 1, 1];
      const add = (dst, src) => dispatch(pipes.residual, [dst, src], spread(T * d), slot([T * d, 0, 0, 0]));
      const copy = (src, from, bytes, name, layer, offset) => {
        if (copied + bytes > Math.max(STAGING_BYTES, bytes)) submit();
        ops.push({ copy: [src, from, bytes], at: copied, name, layer, offset });
        copied += bytes;
      };
      const finish = async (sub) => {
        try {
          await sub.staging.mapAsync(GPUMapMode.READ, 0, sub.bytes);
        } catch (e) {
          throw new Error(`the GPU device was lost (${this.lostReason || e.message})`);
        }
        const mapped = sub.staging.getMappedRange(0, sub.bytes);
        for (const pc of sub.placed) sink(pc.name, pc.layer, new Float32Array(mapped, pc.at, pc.bytes / 4), pc.offset);
        sub.staging.unmap();
        spare.push(sub.staging);
      };
      const submit = () => {
        let staging = null;
        if (copied > 0) {
          const i = spare.findIndex((b) => b.size >= copied);
          staging = i >= 0 ? spare.splice(i, 1)[0]
                           : device.createBuffer({ label: 'model staging', size: align16(copied),
                                                   usage: GPUBufferUsage.MAP_READ | CD });
        }
        const ubuf = device.createBuffer({ size: Math.max(256, uniforms.length * 256),
                                           usage: GPUBufferUsage.UNIFORM | CD });
        uniforms.forEach((u, i) => q.writeBuffer(ubuf, i * 256, u));
        const enc = device.createCommandEncoder();
        let pass = null;
        const placed = [];
        for (const op of ops) {
          if (op.copy) {
            if (pass) pass.end(), (pass = null);
            enc.copyBufferToBuffer(op.copy[0], op.copy[1], staging, op.at, op.copy[2]);
            placed.push({ at: op.at, bytes: op.copy[2], name: op.name, layer: op.layer, offset: op.offset });
            continue;
          }
          if (!pass) pass = enc.beginComputePass();
          const entries = op.entries.map((buffer, binding) => ({ binding, resource: { buffer } }));
          entries.push({ binding: entries.length, resource: { buffer: ubuf, offset: op.offset, size: 64 } });
          pass.setPipeline(op.pipeline);
          pass.setBindGroup(0, device.createBindGroup({ layout: op.pipeline.getBindGroupLayout(0), entries }));
          pass.dispatchWorkgroups(...op.groups);
        }
        if (pass) pass.end();
        if (this.testLoseDevice) {
          this.testLoseDevice = false;
          device.destroy();
        }
        q.submit([enc.finish()]);
        ubuf.destroy();
        if (staging) pending.push({ staging, placed, bytes: copied });
        ops = [], uniforms = [], copied = 0;
      };
      // Read-back keeps at most two submissions' mappings waiting, so the GPU runs on while the CPU copies.
      const settle = async (keep) => {
        while (pending.length > keep) await finish(pending.shift());
      };

      // 1. embeddings: x = wte[ids] + wpe[0..T), a piece at a time
      for (const pc of W[0].pieces)
        dispatch(pipes.embedding, [ids, pc.buffer, x], spread(T * d), slot([T, d, pc.row0, pc.rows, 0, 0, 0, 0]));
      for (const pc of W[1].pieces)
        dispatch(pipes.embedding, [ids, pc.buffer, x], spread(T * d), slot([T, d, pc.row0, pc.rows, 1, 0, 0, 0]));

      for (let l = 0; l < L; ++l) {
        const keep = job.keep[l];
        if (keep && keep.residIn) copy(x, 0, T * d * 4, 'residIn', l, 0);
        // 2. attention on norm1(x): Q, K, V, then a chunk of heads at a time, then out_proj
        norm(x, 0, h, T, layerMat(l, LN1), layerMat(l, LN1 + 1));
        [WQ, WK, WV].forEach((k, i) => linear(h, 0, T, d, layerMat(l, k), layerMat(l, k + 1), qkv, i * T * d, d));
        for (let h0 = 0; h0 < H; h0 += headsPerChunk) {
          const n = Math.min(headsPerChunk, H - h0);
          gemm(this.gemmT, qkv, qkv, null, sc, { M: T, N: T, K: hd, lda: d, ldb: d, ldc: T, aOff: h0 * hd,
                                                 bOff: T * d + h0 * hd, aBatch: hd, bBatch: hd, cBatch: T * T }, n);
          dispatch(this.rows, [sc, scaled, p, this.dummy2, this.dummy], [T, n, 1],
                   slot([T, h0, 1, 0xff800000], [1 / Math.sqrt(hd), 1]));
          gemm(this.gemmN, p, qkv, null, ctx, { M: T, N: hd, K: T, lda: T, ldb: d, ldc: d, bOff: 2 * T * d + h0 * hd,
                                                cOff: h0 * hd, aBatch: T * T, bBatch: hd, cBatch: hd, causal: true }, n);
          if (keep) {
            const bytes = n * T * T * 4, offset = h0 * T * T;
            if (keep.weights) copy(p, 0, bytes, 'weights', l, offset);
            if (keep.scores) copy(sc, 0, bytes, 'scores', l, offset);
            if (keep.scaled) copy(scaled, 0, bytes, 'scaled', l, offset);
          }
        }
        linear(ctx, 0, T, d, layerMat(l, WO), layerMat(l, WO + 1), att, 0, d);
        if (keep) {
          const rows = T * d * 4;
          if (keep.inputs) copy(h, 0, rows, 'inputs', l, 0);
          if (keep.q) copy(qkv, 0, rows, 'q', l, 0);
          if (keep.k) copy(qkv, rows, rows, 'k', l, 0);
          if (keep.v) copy(qkv, 2 * rows, rows, 'v', l, 0);
          if (keep.context) copy(ctx, 0, rows, 'context', l, 0);
          if (keep.output) copy(att, 0, rows, 'output', l, 0);
        }
        add(x, att);
        // 3. feed-forward on norm2(x): Linear d -> 4d, GELU, Linear 4d -> d, and the residual
        norm(x, 0, h2, T, layerMat(l, LN2), layerMat(l, LN2 + 1));
        linear(h2, 0, T, d, layerMat(l, FC), layerMat(l, FC + 1), ff, 0, 4 * d);
        dispatch(pipes.gelu, [ff], spread(T * 4 * d), slot([T * 4 * d, 0, 0, 0]));
        linear(ff, 0, T, 4 * d, layerMat(l, PROJ), layerMat(l, PROJ + 1), mlp, 0, d);
        add(x, mlp);
        if (keep && keep.residOut) copy(x, 0, T * d * 4, 'residOut', l, 0);
        if (ops.length > 256) submit();  // long models: keep each command buffer modest
        await settle(2);
      }

      // 4. final norm of the rows whose logits are kept, then the head (tied to wte or its own), a piece at a time
      const { first, rows } = job.logits;
      norm(x, first * d, h, rows, W[2], W[3]);
      linear(h, first * d, rows, d, W[4] || W[0], null, logits, 0, V);
      copy(logits, 0, rows * V * 4, 'logits', -1, 0);
      submit();
      await settle(0);
      for (const s of spare) s.destroy();
    },
  });
})();
