# kube-proxy's nftables shapes (kubernetes pkg/proxy/nftables/proxier.go): a
# service-ips verdict map -> a chain per service (numgen random mod N vmap) -> a
# DNAT chain per endpoint, for the 1,000 x 100-endpoint mesh of BenchmarkAgentUpdate
# (same VIPs and addresses). `full` prints the whole table; `change S V` prints the
# one transaction that moves service S to its version-V endpoints, as a partial sync
# writes it. Load and time them only inside a network namespace of your own
# (docs/PERFORMANCE.md, "The agent at mesh scale").
import sys
S, N = 1000, 100
def svc(s): return "service-S%04d-default/svc-%04d/tcp/p80" % (s, s)
def ep(s, v, i):
    k = s*N + i
    if v == 0: return "127.%d.%d.%d" % (1 + (k >> 16), (k >> 8) & 255, k & 255)
    return "127.%d.%d.%d" % (100 + v % 100, 1 + v // 100, i + 1)
def epchain(s, v, i): return "endpoint-E%04d-%d-%d-default/svc-%04d/tcp/p80__%s/9700" % (s, v, i, s, ep(s, v, i))
def vip(s): return "127.77.%d.%d" % (s // 250, s % 250 + 1)
def endpoints(out, s, v):
    for i in range(N):
        c = epchain(s, v, i)
        out.append("add chain ip kube-proxy %s" % c)
        out.append("add rule ip kube-proxy %s ip saddr %s jump mark-for-masquerade" % (c, ep(s, v, i)))
        out.append("add rule ip kube-proxy %s meta l4proto tcp dnat to %s:9700" % (c, ep(s, v, i)))
def service_rule(out, s, v):
    vm = ", ".join("%d : goto %s" % (i, epchain(s, v, i)) for i in range(N))
    out.append("add rule ip kube-proxy %s ip daddr %s tcp dport 80 numgen random mod %d vmap { %s }" % (svc(s), vip(s), N, vm))
mode = sys.argv[1]
out = []
if mode == "full":
    out += ["add table ip kube-proxy",
            "add chain ip kube-proxy mark-for-masquerade",
            "add rule ip kube-proxy mark-for-masquerade mark set mark or 0x4000",
            "add map ip kube-proxy service-ips { type ipv4_addr . inet_proto . inet_service : verdict ; }",
            "add chain ip kube-proxy services",
            "add rule ip kube-proxy services ip daddr . meta l4proto . th dport vmap @service-ips",
            "add chain ip kube-proxy nat-output { type nat hook output priority -100 ; policy accept ; }",
            "add rule ip kube-proxy nat-output jump services"]
    for s in range(S):
        out.append("add chain ip kube-proxy %s" % svc(s))
        endpoints(out, s, 0)
        service_rule(out, s, 0)
        out.append("add element ip kube-proxy service-ips { %s . tcp . 80 : goto %s }" % (vip(s), svc(s)))
else:  # change s from version 0 to v: one transaction, as a partial sync writes it
    s, v = int(sys.argv[2]), int(sys.argv[3])
    endpoints(out, s, v)
    out.append("flush chain ip kube-proxy %s" % svc(s))
    service_rule(out, s, v)
    for i in range(N):
        out.append("flush chain ip kube-proxy %s" % epchain(s, 0, i))
        out.append("delete chain ip kube-proxy %s" % epchain(s, 0, i))
print("\n".join(out))
