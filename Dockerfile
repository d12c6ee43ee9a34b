# oauth-sidecar image. Build: podman build --format docker -t oauth-sidecar .   (or docker build)
# The base stays a build argument (not a digest) so air-gapped builders can supply their own.
ARG NODE_IMAGE=node:24-bookworm-slim

# --- build: full dependency tree, TypeScript -> dist/
FROM ${NODE_IMAGE} AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --ignore-scripts --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
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
# Heap caps sized for the 256Mi limit in deploy/. Chosen by measurement (node bench/run.mjs
# --targets direct --rounds 0 --duration 8 --footprint-node-options=..., Node 24.21, 2 shared
# cores under load from other jobs; docs/benchmarks.md "Footprint"):
#   --max-semi-space-size  idle RSS  peak 2 KB (wrk -c50)  peak 50 x 1 MiB  2 KB req/s
#   8 (before)             104 MiB   135 MiB               186 MiB          2,386
#   2 (shipped)             96 MiB   121 MiB               139 MiB          2,117
#   1                       95 MiB   114 MiB               124 MiB            369 (scavenges)
# The old-space cap keeps a flood from growing the heap past the pod limit (test/bounded-work).
ENV NODE_ENV=production \
    NODE_OPTIONS="--max-old-space-size=160 --max-semi-space-size=2"
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
ENTRYPOINT ["node", "dist/main.js"]
