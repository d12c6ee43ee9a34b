# oauth-sidecar image. Build: podman build --format docker -t oauth-sidecar .   (or docker build)
# The base stays a build argument (not a digest) so air-gapped builders can supply their own.
ARG NODE_IMAGE=node:24-bookworm-slim

# --- build: full dependency tree, TypeScript -> dist/, then the entry point bundled by esbuild
#     (dist/main.js and dist/chunks/; scripts/bundle.mjs says why)
FROM ${NODE_IMAGE} AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --ignore-scripts --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY scripts/bundle.mjs ./scripts/
COPY src ./src
RUN npm run build

# --- runtime dependencies only; no install scripts run
FROM ${NODE_IMAGE} AS deps
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --ignore-scripts --no-audit --no-fund && npm cache clean --force

# --- runtime
FROM ${NODE_IMAGE}
ARG VERSION=0.1.0
ARG REVISION=unknown
LABEL org.opencontainers.image.title="oauth-sidecar" \
      org.opencontainers.image.description="Proxies allow-listed paths to the OAuth2-protected Spark Commodities API and injects a bearer token it keeps fresh." \
      org.opencontainers.image.licenses="MIT" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.base.name="${NODE_IMAGE}"
# Memory settings sized for the 256Mi limit in deploy/, chosen by measurement (Node 24.21, 2 shared
# cores; docs/benchmarks.md "Footprint"). Idle / peak RSS from `taskset -c 0 node bench/run.mjs
# --targets direct --rounds 1 --duration 5 --no-pin [--footprint-node-options=...]
# [--footprint-glibc-tunables=...]`; CPU per 2 KB request from the sidecar's own CPU time under
# wrk -c50, sidecar pinned to CPU 0 (relative figures, the core is shared):
#   setting                              idle RSS  peak 2 KB   peak 50 x 1 MiB  CPU/request
#   semi-space 8 (before issue 8)        104 MiB   135 MiB     186 MiB          -
#   semi-space 2, no GLIBC_TUNABLES       92-93    114-119     138-144          baseline
#   + GLIBC_TUNABLES below (shipped)      86-87    104-111     128-134          same (5 A/B runs)
#   the same, undici's index not loaded   83       100-103     114-124          -   (current code;
#     same day before it: 85-86 / 103-105 / 121-128, 3 runs each)
#   semi-space 1 (+ tunables)             86       106         121              +40 % (scavenges)
#   + tunables, --v8-pool-size=2 / 1      86 / 91  108 / 117   127 / 134        -
#   + tunables, --max-old-space=128 / 96  86 / 87  109 / 112   125 / 123        -
#   --liftoff-only (cmd line, no tunables) 84     -            -                +27 % (3 runs beside wrk: noise)
# CPU per 2 KB request, sidecar alone on one core, alternating A/B runs (bench/run.mjs --targets
# sidecar --only-2kb, 1 round x 8 s each, --trace-gc):
#   --max-old-space-size=160 alone (V8's young generation grows to 64 MiB semi-spaces)
#                                          138-146 us, 9-18 mark-compacts; peak 50 x 1 MiB 250-290 MiB
#   the same + --max-semi-space-size=2 / 4 / 8
#                                          159-240 / 196-205 / 199-228 us, 40-59 mark-compacts
#   semi-space 2 + --no-allocation-site-pretenuring (shipped, ENTRYPOINT below)
#                                          123-135 us, 16-17 mark-compacts; peak 119-133 MiB
#   semi-space 2 + --heap-growing-percent=100 / 200, or --single-threaded-gc: no better
# With a young generation this small, V8's allocation-site pretenuring decides that the
# per-request objects alive across a scavenge are long-lived and allocates them in old space
# directly: old space fills with garbage, marking runs most of the time. Off, they die young.
# --liftoff-only (shipped, ENTRYPOINT below; fourth pass, Node 24.21, bench/run.mjs footprint,
# alternating runs): idle 79-80 MiB with it, 84-89 MiB without (anonymous pages 26 vs 30-34 MiB);
# peaks unchanged (2 KB 97-99 vs 101-104, 50 x 1 MiB 112-125 vs 120-126 MiB). It keeps undici's
# WebAssembly HTTP parser (llhttp) in V8's baseline wasm tier: no optimising compile, and none of
# the compiler memory that stays behind. Cost: the parser's share of the sidecar's CPU samples
# (perf record, 2 KB load) went from 2.1-2.6 % to 3.4 %, about one percent more CPU per request;
# alternating 8 s runs could not tell the two apart (medians 245 vs 250 us, noise +-20 %).
# NODE_OPTIONS may carry neither flag, so both are in the ENTRYPOINT.
# GLIBC_TUNABLES: one malloc arena and a 128 KiB trim threshold. V8 optimises undici's
# WebAssembly HTTP parser on a worker thread with ~10 MiB of scratch memory, which glibc kept in
# that thread's own arena after the compile. The old-space cap keeps a flood from growing the heap
# past the pod limit (test/flood.test.ts, which runs with these settings and the ENTRYPOINT's flag).
# dist/main.js is one esbuild bundle (sixth pass, same bench, these settings): idle 73 MiB
# (48 file-backed, 25 anonymous) against 79-80 MiB (54 + 26) when the process loaded tsc's
# output and its packages, 230 files (43 now: pino stays a package). Resolving that many modules
# made V8 compile node's path functions with TurboFan at start, touching ~6 MiB more of the node
# binary. Peaks unchanged (2 KB 97-105 MiB, 50 x 1 MiB 120-123 MiB; tsc's build 98-105, 118-124).
ENV NODE_ENV=production \
    NODE_OPTIONS="--max-old-space-size=160 --max-semi-space-size=2" \
    GLIBC_TUNABLES="glibc.malloc.arena_max=1:glibc.malloc.trim_threshold=131072"
WORKDIR /app
# Owned by root and read-only to uid 1000: the process cannot rewrite its own code.
COPY --from=deps /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
COPY package.json ./
USER node
# 8080 proxy (loopback by default: PROXY_LISTEN=127.0.0.1:8080), 9090 admin (/healthz /readyz /metrics).
EXPOSE 8080 9090
# No curl in slim images: node asks /healthz on the admin port (following ADMIN_LISTEN if set).
HEALTHCHECK --interval=15s --timeout=3s --start-period=10s --retries=3 \
  CMD ["node", "-e", "const l=process.env.ADMIN_LISTEN||'0.0.0.0:9090';const i=l.lastIndexOf(':');let h=l.slice(0,i).replace(/^\\[|\\]$/g,'');if(h===''||h==='0.0.0.0'||h==='::')h='127.0.0.1';fetch('http://'+(h.includes(':')?'['+h+']':h)+':'+l.slice(i+1)+'/healthz',{signal:AbortSignal.timeout(2500)}).then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"]
ENTRYPOINT ["node", "--no-allocation-site-pretenuring", "--liftoff-only", "dist/main.js"]
