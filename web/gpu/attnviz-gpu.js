// attnviz's WebGPU backend: one attention layer's forward pass on the GPU, straight over navigator.gpu
// (Emscripten 3.1.6's own WebGPU bindings are stale). The kernels are web/gpu/*.wgsl; the build puts their
// text in ATTNVIZ_WGSL at the top of this file (web/gpu/embed.cmake).
//
//   const gpu = new AttnvizGpu();
//   await gpu.init();                // the adapter's description, or a rejection saying why not
//   const ms = await gpu.run(job, sink);
//
// A job (all sizes in floats, matrices row-major, as the C++ engine holds them):
//   T, dIn, heads, headDim, width (heads * headDim), outWidth, scale, keepScale,
//   hasWeights, causal, outProj, dropout, want: {scores, scaled, dropped},
//   x (T x dIn), paramsId, and weights when paramsId !== gpu.hostWeightsId() (else null):
//     {wq, wk, wv (width x dIn), bq, bk, bv (width, or null), wo (outWidth x width), bo (outWidth)},
//   keep (Uint32Array: one bit per (head, row, column) cell of the layer, 1 = kept).
// sink(name, data, offset) receives the results while they are mapped: name is q, k, v, scores, scaled,
// weights, dropped, context or output; data a Float32Array view; offset where it starts in that tensor.
// Runs are queued: one at a time, in order.
'use strict';

class AttnvizGpu {
  constructor() {
    this.device = null;
    this.adapterInfo = '';
    this.limits = null;
    this.lostReason = '';
    this.queue = Promise.resolve();
    this.buffers = new Map();  // name -> GPUBuffer, grown on demand
    this.paramsId = null;      // whose weights the GPU's weight buffers hold
    this.hostWeights = null;   // the weights last handed over, with their paramsId
    // For tests: a smaller per-buffer limit than the device's (bytes; 0 = the device's), and a device lost
    // in the middle of the next run.
    this.testLimitBytes = 0;
    this.testLoseDevice = false;
  }

  // The parameter set whose weights this layer holds (the caller hands weights over only when it changes).
  hostWeightsId() {
    return this.hostWeights ? this.hostWeights.id : null;
  }

  // The largest buffer of one (heads, T, T) chunk: big layers are computed a few heads at a time, which
  // bounds GPU memory (four such buffers and their read-back copy) whatever the device allows.
  static get CHUNK_BYTES() {
    return 32 << 20;
  }

  // A size for the layer's messages: 31.6 KiB, 154.4 MiB.
  static MiB(b) {
    return b < 1048576 ? (b / 1024).toFixed(1) + ' KiB' : (b / 1048576).toFixed(1) + ' MiB';
  }

  // Refuses a job that needs a buffer past `limit` bytes: need is [[what, bytes], ...].
  static checkFits(need, limit) {
    const MiB = AttnvizGpu.MiB;
    for (const [what, bytes] of need)
      if (bytes > limit)
        throw new Error(`${what} need ${MiB(bytes)}, more than this GPU's ${MiB(limit)} per buffer: too large for WebGPU here`);
  }

  // Kernel `name`'s shader module on `device` (its text is ATTNVIZ_WGSL[name]), or why it does not compile.
  static async compile(device, name) {
    const m = device.createShaderModule({ label: name, code: ATTNVIZ_WGSL[name] });
    const info = await m.getCompilationInfo();
    const errors = info.messages.filter((x) => x.type === 'error');
    if (errors.length)
      throw new Error(`${name}.wgsl does not compile: ` + errors.map((x) => `${x.lineNum}: ${x.message}`).join('; '));
    return m;
  }

  async init() {
    if (this.device) return this.adapterInfo;
    if (!navigator.gpu) throw new Error('this browser has no WebGPU (navigator.gpu is missing)');
    const adapter = await navigator.gpu.requestAdapter({ powerPreference: 'high-performance' });
    if (!adapter) throw new Error('no WebGPU adapter: the browser offers none on this machine');
    const want = (name) => adapter.limits[name];
    const device = await adapter.requestDevice({
      requiredLimits: {
        maxStorageBufferBindingSize: want('maxStorageBufferBindingSize'),
        maxBufferSize: want('maxBufferSize'),
      },
    });
    device.lost.then((info) => {
      if (this.device === device) {
        this.device = null;
        this.lostReason = info.message || info.reason || 'unknown reason';
      }
    });
    device.onuncapturederror = (e) => console.error('attnviz WebGPU: ' + e.error.message);
    const gemm = await AttnvizGpu.compile(device, 'gemm'), attention = await AttnvizGpu.compile(device, 'attention');
    const pipeline = (m, constants) =>
      device.createComputePipelineAsync({ layout: 'auto', compute: { module: m, entryPoint: 'main', constants } });
    [this.gemmT, this.gemmN, this.rows] = await Promise.all([
      pipeline(gemm, { TRANSPOSE_B: 1 }), pipeline(gemm, { TRANSPOSE_B: 0 }), pipeline(attention, {}),
    ]);
    const info = adapter.info || {};
    this.adapterInfo = [info.vendor, info.architecture, info.description].filter(Boolean).join(' ') || 'unnamed adapter';
    if (info.isFallbackAdapter) this.adapterInfo += ' (software fallback)';
    this.limits = device.limits;
    this.device = device;
    this.buffers = new Map();
    this.paramsId = null;
    this.dummy = device.createBuffer({ size: 16, usage: GPUBufferUsage.STORAGE });
    this.dummy2 = device.createBuffer({ size: 16, usage: GPUBufferUsage.STORAGE });
    return this.adapterInfo;
  }

  run(job, sink) {
    // The weights are handed over once per parameter set and kept here (a device made again after a loss
    // gets them too); each job takes its set now, whatever is handed over while it waits.
    if (job.weights) this.hostWeights = { id: job.paramsId, ...job.weights };
    job.weightsRef = this.hostWeights && this.hostWeights.id === job.paramsId ? this.hostWeights : null;
    const next = this.queue.then(() => this.runNow(job, sink));
    this.queue = next.catch(() => {});
    return next;
  }

  // The most bytes one buffer may hold here.
  perBufferBytes() {
    const l = this.limits;
    const device = Math.min(l.maxStorageBufferBindingSize, l.maxBufferSize);
    return this.testLimitBytes > 0 ? Math.min(device, this.testLimitBytes) : device;
  }

  buffer(name, bytes, usage) {
    let b = this.buffers.get(name);
    if (b && b.size >= bytes) return b;
    if (b) b.destroy();
    b = this.device.createBuffer({ label: name, size: Math.max(16, Math.ceil(bytes / 16) * 16), usage });
    this.buffers.set(name, b);
    if (['wqkv', 'bqkv', 'wo', 'bo'].includes(name)) this.paramsId = null;
    return b;
  }

  // A device for the next run: after a loss, a new one, or why there is none.
  async ensureDevice() {
    if (this.device) return;
    const lost = this.lostReason;
    try {
      await this.init();
    } catch (e) {
      throw new Error(lost ? `the GPU device was lost (${lost}) and could not be recreated: ${e.message}` : e.message);
    }
  }

  async runNow(job, sink) {
    const t0 = performance.now();
    await this.ensureDevice();
    const device = this.device;
    const { T, dIn, heads: H, headDim: hd, width: W, outWidth: OW } = job;
    const limit = this.perBufferBytes();
    AttnvizGpu.checkFits([
      ['the Q, K and V of ' + T + ' tokens', 3 * T * W * 4],
      ['the query, key and value weights', job.hasWeights ? 3 * W * dIn * 4 : 0],
      ['the output projection', job.outProj ? OW * W * 4 : 0],
      ['the dropout mask', job.dropout ? job.keep.byteLength : 0],
      ["one head's scores (T x T)", T * T * 4],
    ], limit);
    const headsPerChunk = Math.max(1, Math.min(H, Math.floor(Math.min(limit, AttnvizGpu.CHUNK_BYTES) / (T * T * 4))));

    const S = GPUBufferUsage.STORAGE, CD = GPUBufferUsage.COPY_DST, CS = GPUBufferUsage.COPY_SRC;
    device.pushErrorScope('out-of-memory');
    device.pushErrorScope('validation');
    const x = this.buffer('x', T * dIn * 4, S | CD);
    const qkv = this.buffer('qkv', 3 * T * W * 4, S | CD | CS);
    const ctx = this.buffer('context', T * W * 4, S | CS);
    const out = job.outProj ? this.buffer('output', T * OW * 4, S | CS) : null;
    const chunk = headsPerChunk * T * T * 4;
    const sc = this.buffer('scores', chunk, S | CS), scaled = this.buffer('scaled', chunk, S | CS);
    const p = this.buffer('weights', chunk, S | CS);
    const dropped = job.dropout ? this.buffer('dropped', chunk, S | CS) : this.dummy2;
    const keep = job.dropout ? this.buffer('keep', job.keep.byteLength, S | CD) : this.dummy;
    const tail = (3 * T * W + T * W + (job.outProj ? T * OW : 0)) * 4;
    const staging = this.buffer('staging', Math.max(4 * chunk, tail), GPUBufferUsage.MAP_READ | CD);
    let wqkv = null, bqkv = null, wo = null, bo = null;
    if (job.hasWeights) {
      wqkv = this.buffer('wqkv', 3 * W * dIn * 4, S | CD);
      bqkv = this.buffer('bqkv', 3 * W * 4, S | CD);
    }
    if (job.outProj) {
      wo = this.buffer('wo', OW * W * 4, S | CD);
      bo = this.buffer('bo', OW * 4, S | CD);
    }
    const q = device.queue;
    q.writeBuffer(x, 0, job.x);
    const weights = job.weightsRef;
    if (job.hasWeights && !weights) throw new Error('the weights of this parameter set were not handed over');
    if (job.hasWeights && this.paramsId !== job.paramsId) {
      const w = weights;
      [w.wq, w.wk, w.wv].forEach((m, i) => q.writeBuffer(wqkv, i * W * dIn * 4, m));
      if (w.bq) [w.bq, w.bk, w.bv].forEach((b, i) => q.writeBuffer(bqkv, i * W * 4, b));
      if (job.outProj) {
        q.writeBuffer(wo, 0, w.wo);
        q.writeBuffer(bo, 0, w.bo);
      }
      this.paramsId = job.paramsId;
    }
    if (!job.hasWeights) for (let i = 0; i < 3; ++i) q.writeBuffer(qkv, i * T * W * 4, job.x);
    if (job.dropout) q.writeBuffer(keep, 0, job.keep);
    const failed = [await device.popErrorScope(), await device.popErrorScope()].find(Boolean);
    if (failed) throw new Error('the GPU could not hold this layer: ' + failed.message);

    // Every dispatch of a submission gets its own 256-byte slot of one uniform buffer.
    let uniforms = [];
    const slot = (words) => {
      const data = new ArrayBuffer(64);
      new Uint32Array(data).set(words.u || []);
      if (words.f) new Float32Array(data, 16, words.f.length).set(words.f);
      uniforms.push(data);
      return (uniforms.length - 1) * 256;
    };
    const passes = [];
    const gemm = (pipeline, a, b, bias, c, d, batch) => {
      passes.push({ pipeline, groups: [Math.ceil(d.N / 64), Math.ceil(d.M / 64), batch],
                    entries: [a, b, bias || this.dummy, c], offset: slot({ u: [
                      d.M, d.N, d.K, d.lda, d.ldb, d.ldc, d.aOff || 0, d.bOff || 0, d.cOff || 0, d.aBatch || 0,
                      d.bBatch || 0, d.cBatch || 0, d.biasOff || 0, d.biasBatch || 0,
                      (bias ? 1 : 0) | (d.causal ? 2 : 0), 0] }) });
    };
    const submit = async (copies) => {
      const ubuf = device.createBuffer({ size: Math.max(256, uniforms.length * 256), usage: GPUBufferUsage.UNIFORM | CD });
      uniforms.forEach((u, i) => q.writeBuffer(ubuf, i * 256, u));
      const enc = device.createCommandEncoder();
      const pass = enc.beginComputePass();
      for (const ps of passes) {
        const entries = ps.entries.map((buffer, binding) => ({ binding, resource: { buffer } }));
        entries.push({ binding: entries.length, resource: { buffer: ubuf, offset: ps.offset, size: 64 } });
        pass.setPipeline(ps.pipeline);
        pass.setBindGroup(0, device.createBindGroup({ layout: ps.pipeline.getBindGroupLayout(0), entries }));
        pass.dispatchWorkgroups(...ps.groups);
      }
      pass.end();
      let at = 0;
      const placed = copies.map(([src, bytes, name, offset, from = 0]) => {
        enc.copyBufferToBuffer(src, from, staging, at, bytes);
        const piece = { at, bytes, name, offset };
        at += bytes;
        return piece;
      });
      if (this.testLoseDevice) {
        this.testLoseDevice = false;
        device.destroy();
      }
      q.submit([enc.finish()]);
      passes.length = 0;
      uniforms = [];
      try {
        await staging.mapAsync(GPUMapMode.READ, 0, Math.max(at, 4));
      } catch (e) {
        throw new Error(`the GPU device was lost (${this.lostReason || e.message})`);
      } finally {
        ubuf.destroy();
      }
      const mapped = staging.getMappedRange(0, Math.max(at, 4));
      for (const pc of placed) sink(pc.name, new Float32Array(mapped, pc.at, pc.bytes / 4), pc.offset);
      staging.unmap();
    };

    // 1. Q, K, V: one batched product over the three projections, bias included.
    if (job.hasWeights)
      gemm(this.gemmT, x, wqkv, weights.bq ? bqkv : null, qkv,
           { M: T, N: W, K: dIn, lda: dIn, ldb: dIn, ldc: W, bBatch: W * dIn, cBatch: T * W, biasBatch: W }, 3);
    // 2. A chunk of heads at a time: scores, softmax rows (+ dropout), context into its columns.
    for (let h0 = 0; h0 < H; h0 += headsPerChunk) {
      const n = Math.min(headsPerChunk, H - h0);
      gemm(this.gemmT, qkv, qkv, null, sc, { M: T, N: T, K: hd, lda: W, ldb: W, ldc: T, aOff: h0 * hd,
                                             bOff: T * W + h0 * hd, aBatch: hd, bBatch: hd, cBatch: T * T }, n);
      passes.push({ pipeline: this.rows, groups: [T, n, 1], entries: [sc, scaled, p, dropped, keep],
                    offset: slot({ u: [T, h0, (job.causal ? 1 : 0) | (job.dropout ? 2 : 0), 0xff800000],
                                   f: [job.scale, job.keepScale] }) });
      gemm(this.gemmN, job.dropout ? dropped : p, qkv, null, ctx,
           { M: T, N: hd, K: T, lda: T, ldb: W, ldc: W, bOff: 2 * T * W + h0 * hd, cOff: h0 * hd, aBatch: T * T,
             bBatch: hd, cBatch: hd, causal: job.causal }, n);
      const bytes = n * T * T * 4, offset = h0 * T * T;
      const copies = [[p, bytes, 'weights', offset]];
      if (job.want.scores) copies.push([sc, bytes, 'scores', offset]);
      if (job.want.scaled) copies.push([scaled, bytes, 'scaled', offset]);
      if (job.want.dropped && job.dropout) copies.push([dropped, bytes, 'dropped', offset]);
      await submit(copies);
    }
    // 3. The output projection, then Q, K, V, the merged context and the output come back.
    if (job.outProj)
      gemm(this.gemmT, ctx, wo, bo, out, { M: T, N: OW, K: W, lda: W, ldb: W, ldc: OW }, 1);
    const copies = [[ctx, T * W * 4, 'context', 0]];
    if (job.hasWeights)
      ['q', 'k', 'v'].forEach((name, i) => copies.push([qkv, T * W * 4, name, 0, i * T * W * 4]));
    if (job.outProj) copies.push([out, T * OW * 4, 'output', 0]);
    await submit(copies);
    return performance.now() - t0;
  }
}

if (typeof window !== 'undefined') window.AttnvizGpu = AttnvizGpu;
