// A minimal proxy-wasm host on Node.js's V8, for measuring loctree's filter
// and the empty filter (the floor) on the engine Envoy embeds. Run it as
// proxy-wasm-cpp-host configures V8: `node --no-liftoff proxywasm.js JOB`
// (src/v8/v8.cc: "--no-liftoff"), where JOB is a JSON file:
//
//   {"modules": [{"name": "floor", "wasm": "empty.wasm"}, ...],
//    "config": "<plugin configuration>", "shared": {"key": "blob file"},
//    "requests": 10000, "block": 64}
//
// It offers the ABI 0.2.1 host functions both modules import and the WASI
// calls the Go runtime makes, runs Envoy's lifecycle (instantiate,
// _initialize, proxy_on_context_create(root), proxy_on_vm_start,
// proxy_on_configure), then requests through the full HTTP lifecycle
// (context create, request headers, response headers, on_log, on_done,
// on_delete), alternating blocks of requests between the modules so both
// see the same machine load. It prints one JSON object: per module the
// median time per request over the blocks, the picks seen, and the linear
// memory (of a base VM that is only initialized, and of the worker after
// the requests), plus runtime/metrics samples when the module exports the
// test build's loctree_memstat hook.
'use strict';
const fs = require('fs');
const crypto = require('crypto');

const OK = 0, NOT_FOUND = 1, BAD_ARGUMENT = 2;
const EBADF = 8;
const MAP_REQUEST_HEADERS = 0, MAP_RESPONSE_HEADERS = 2;
const BUFFER_PLUGIN_CONFIGURATION = 7;

// The request and response of every stream, as byte arrays.
const headerMap = (m) => m.map(([k, v]) => [Buffer.from(k), Buffer.from(v)]);
const REQUEST = headerMap([[':method', 'GET'], [':path', '/'], [':authority', 'reviews:9080'], [':scheme', 'http']]);
const RESPONSE = headerMap([[':status', '200']]);

// VM is one instance with the host state its hostcalls read.
class VM {
  constructor(module, job, shared) {
    this.job = job;
    this.shared = shared;
    this.maps = [];
    this.metrics = 0;
    this.picks = 0;
    const imports = { env: this.env(), wasi_snapshot_preview1: this.wasi() };
    this.instance = new WebAssembly.Instance(module, imports);
    this.x = this.instance.exports;
    this.x._initialize();
  }

  // bytes and view are the module's memory, renewed when it grows.
  bytes() {
    if (this.buf !== this.x.memory.buffer) this.remap();
    return this.u8;
  }
  view() {
    if (this.buf !== this.x.memory.buffer) this.remap();
    return this.dv;
  }
  remap() {
    this.buf = this.x.memory.buffer;
    this.u8 = new Uint8Array(this.buf);
    this.dv = new DataView(this.buf);
  }
  str(p, n) { return Buffer.from(this.x.memory.buffer, p, n).toString('latin1'); }
  // copy is a copy of n bytes of module memory at p.
  copy(p, n) { return this.bytes().slice(p, p + n); }

  // ret copies data into a buffer the module allocates and writes its
  // address and size (proxy-wasm's return_data / return_size).
  ret(data, retPtr, retSize) {
    let p = 0;
    if (data.length > 0) {
      p = this.x.proxy_on_memory_allocate(data.length);
      this.bytes().set(data, p);
    }
    const v = this.view();
    v.setUint32(retPtr, p, true);
    v.setUint32(retSize, data.length, true);
    return OK;
  }

  // find is the index of the entry of map m whose key is the n bytes at p
  // of module memory, or -1. Header maps hold [key, value] byte arrays, as
  // a C++ host compares bytes without making strings.
  find(m, p, n) {
    const u8 = this.bytes();
    outer: for (let i = 0; i < m.length; i++) {
      const k = m[i][0];
      if (k.length !== n) continue;
      for (let j = 0; j < n; j++) if (k[j] !== u8[p + j]) continue outer;
      return i;
    }
    return -1;
  }

  env() {
    return {
      proxy_log: () => OK,
      proxy_set_effective_context: () => OK,
      proxy_set_tick_period_milliseconds: () => OK,
      proxy_get_buffer_bytes: (type, start, max, retPtr, retSize) => {
        if (type !== BUFFER_PLUGIN_CONFIGURATION) return NOT_FOUND;
        return this.ret(Buffer.from(this.job.config), retPtr, retSize);
      },
      proxy_get_header_map_value: (type, kp, ks, retPtr, retSize) => {
        const m = this.maps[type];
        const i = m ? this.find(m, kp, ks) : -1;
        return i < 0 ? NOT_FOUND : this.ret(m[i][1], retPtr, retSize);
      },
      proxy_replace_header_map_value: (type, kp, ks, vp, vs) => {
        const m = this.maps[type];
        if (!m) return BAD_ARGUMENT;
        const i = this.find(m, kp, ks), kv = [this.copy(kp, ks), this.copy(vp, vs)];
        if (i >= 0) m[i] = kv; else m.push(kv);
        this.picks++;
        return OK;
      },
      proxy_remove_header_map_value: (type, kp, ks) => {
        const m = this.maps[type];
        if (!m) return BAD_ARGUMENT;
        const i = this.find(m, kp, ks);
        if (i >= 0) m.splice(i, 1);
        return OK;
      },
      proxy_get_header_map_pairs: () => NOT_FOUND,
      proxy_send_local_response: () => OK,
      proxy_http_call: () => BAD_ARGUMENT, // no upstream cluster: the tree comes from shared data
      proxy_get_shared_data: (kp, ks, retPtr, retSize, casPtr) => {
        const v = this.shared.get(this.str(kp, ks));
        if (v === undefined) return NOT_FOUND;
        this.view().setUint32(casPtr, 1, true);
        return this.ret(v, retPtr, retSize);
      },
      proxy_set_shared_data: (kp, ks, vp, vs) => {
        this.shared.set(this.str(kp, ks), Buffer.from(this.bytes().slice(vp, vp + vs)));
        return OK;
      },
      proxy_get_property: () => NOT_FOUND, // no xds.cluster_name: the service comes from :authority
      proxy_define_metric: (type, np, ns, retID) => {
        this.view().setUint32(retID, ++this.metrics, true);
        return OK;
      },
      proxy_increment_metric: () => OK,
      proxy_record_metric: () => OK,
      proxy_get_metric: (id, retPtr) => { this.view().setBigUint64(retPtr, 0n, true); return OK; },
    };
  }

  wasi() {
    const zero2 = (a, b) => { const v = this.view(); v.setUint32(a, 0, true); v.setUint32(b, 0, true); return OK; };
    return {
      args_sizes_get: zero2,
      args_get: () => OK,
      environ_sizes_get: zero2,
      environ_get: () => OK,
      clock_time_get: (id, precision, ptr) => {
        const t = id === 0 ? BigInt(Date.now()) * 1000000n : process.hrtime.bigint();
        this.view().setBigUint64(ptr, t, true);
        return OK;
      },
      random_get: (p, n) => { crypto.randomFillSync(this.bytes(), p, n); return OK; },
      fd_write: (fd, iovs, n, written) => {
        const v = this.view();
        let total = 0;
        for (let i = 0; i < n; i++) {
          const p = v.getUint32(iovs + 8 * i, true), len = v.getUint32(iovs + 8 * i + 4, true);
          if (fd === 2) process.stderr.write(Buffer.from(this.x.memory.buffer, p, len));
          total += len;
        }
        v.setUint32(written, total, true);
        return OK;
      },
      fd_read: () => EBADF,
      fd_close: () => EBADF,
      fd_fdstat_get: (fd, p) => {
        if (fd > 2) return EBADF;
        const v = this.view();
        v.setUint8(p, 2); // character device
        v.setUint16(p + 2, 0, true);
        v.setBigUint64(p + 8, 0xffffffffffffffffn, true);
        v.setBigUint64(p + 16, 0xffffffffffffffffn, true);
        return OK;
      },
      fd_fdstat_set_flags: () => OK,
      fd_prestat_get: () => EBADF,
      fd_prestat_dir_name: () => EBADF,
      // Every subscription fires at once: a reactor never sleeps here.
      poll_oneoff: (inp, out, n, nevents) => {
        const v = this.view();
        for (let i = 0; i < n; i++) {
          v.setBigUint64(out + 32 * i, v.getBigUint64(inp + 48 * i, true), true);
          v.setUint16(out + 32 * i + 8, 0, true);
          v.setUint8(out + 32 * i + 10, v.getUint8(inp + 48 * i + 8));
        }
        v.setUint32(nevents, n, true);
        return OK;
      },
      sched_yield: () => OK,
      proc_exit: (code) => { throw new Error(`proc_exit(${code})`); },
    };
  }

  // start runs the plugin as Envoy starts a worker's root context.
  start() {
    this.x.proxy_on_context_create(1, 0);
    if (!this.x.proxy_on_vm_start(1, 0)) throw new Error('proxy_on_vm_start failed');
    if (!this.x.proxy_on_configure(1, Buffer.byteLength(this.job.config))) throw new Error('proxy_on_configure failed');
    this.next = 2;
  }

  // request is one stream through Envoy's HTTP lifecycle.
  request() {
    const id = this.next++;
    this.maps[MAP_REQUEST_HEADERS] = REQUEST.slice();
    this.x.proxy_on_context_create(id, 1);
    this.x.proxy_on_request_headers(id, REQUEST.length, 1);
    this.maps[MAP_RESPONSE_HEADERS] = RESPONSE.slice();
    this.x.proxy_on_response_headers(id, RESPONSE.length, 1);
    this.x.proxy_on_log(id);
    this.x.proxy_on_done(id);
    this.x.proxy_on_delete(id);
    this.maps.length = 0;
  }

  memstats() {
    if (!this.x.loctree_memstat) return undefined;
    const at = (i) => Number(this.x.loctree_memstat(i));
    const s = { heap_objects: at(1), gc_goal: at(2), runtime_total: at(3) };
    this.x.loctree_gc();
    s.live_after_gc = at(1);
    return s;
  }
}

function median(v) {
  const s = [...v].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)];
}

function main() {
  const job = JSON.parse(fs.readFileSync(process.argv[2]));
  const shared = new Map(Object.entries(job.shared || {}).map(([k, f]) => [k, fs.readFileSync(f)]));
  const runs = job.modules.map((m) => {
    const module = new WebAssembly.Module(fs.readFileSync(m.wasm));
    const base = new VM(module, job, shared); // Envoy's base VM: initialized, never started
    const vm = new VM(module, job, shared);
    vm.start();
    return { name: m.name, base: base.x.memory.buffer.byteLength, vm, ns: [] };
  });
  const block = job.block || 64;
  for (let done = 0; done < job.requests; done += block) {
    for (const r of runs) {
      const t0 = process.hrtime.bigint();
      for (let i = 0; i < block; i++) r.vm.request();
      r.ns.push(Number(process.hrtime.bigint() - t0) / block);
    }
  }
  const out = {};
  for (const r of runs) {
    out[r.name] = {
      ns_per_request: median(r.ns), picks: r.vm.picks, requests: r.ns.length * block,
      base_linear_bytes: r.base, linear_bytes: r.vm.x.memory.buffer.byteLength, memstats: r.vm.memstats(),
    };
  }
  process.stdout.write(JSON.stringify(out) + '\n');
}

main();
