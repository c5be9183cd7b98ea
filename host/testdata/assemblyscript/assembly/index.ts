// A proxy-wasm filter built with another SDK (AssemblyScript,
// @solo-io/proxy-runtime 0.1.8: ABI 0.2.0, WASI as wasi_unstable) whose
// root context is registered under the root id "peer", not loctree's and
// not Envoy's default "": the host must pass the plugin's root_id for it
// to start. Each request gets x-peer-root-id and x-peer-vm-id, the
// plugin_root_id and plugin_vm_id properties it read.
export * from "@solo-io/proxy-runtime/proxy";
import { RootContext, Context, registerRootContext, FilterHeadersStatusValues, stream_context } from "@solo-io/proxy-runtime";
import { get_property } from "@solo-io/proxy-runtime/runtime";

class PeerRoot extends RootContext {
  createContext(context_id: u32): Context {
    return new Peer(context_id, this);
  }
}

class Peer extends Context {
  constructor(context_id: u32, root_context: PeerRoot) {
    super(context_id, root_context);
  }
  onRequestHeaders(a: u32, end_of_stream: bool): FilterHeadersStatusValues {
    stream_context.headers.request.add("x-peer-root-id", String.UTF8.decode(get_property("plugin_root_id")));
    stream_context.headers.request.add("x-peer-vm-id", String.UTF8.decode(get_property("plugin_vm_id")));
    return FilterHeadersStatusValues.Continue;
  }
}

registerRootContext((context_id: u32) => { return new PeerRoot(context_id); }, "peer");
