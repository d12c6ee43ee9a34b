# oauth-sidecar image. Build: podman build --format docker -t oauth-sidecar .   (or docker build)
# The base stays a build argument (not a digest) so air-gapped builders can supply their own.
ARG NODE_IMAGE=node:24-bookworm-slim

FROM ${NODE_IMAGE} AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --ignore-scripts --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY scripts/bundle.mjs ./scripts/
COPY src ./src
RUN npm run build

FROM ${NODE_IMAGE} AS deps
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --ignore-scripts --no-audit --no-fund && npm cache clean --force

FROM ${NODE_IMAGE}
ARG VERSION=0.2.0
ARG REVISION=unknown
LABEL org.opencontainers.image.title="oauth-sidecar" \
      org.opencontainers.image.description="Proxies allow-listed paths to the OAuth2-protected Spark Commodities API and injects a bearer token it keeps fresh." \
      org.opencontainers.image.licenses="MIT" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.base.name="${NODE_IMAGE}"
# Sized for the 256Mi limit in deploy/, each setting measured (docs/benchmarks.md "Footprint",
# "The image's settings"): a 2 MiB young generation, no allocation-site pretenuring, one malloc
# arena, Liftoff only. NODE_OPTIONS may carry neither node flag, so both are in the ENTRYPOINT.
ENV NODE_ENV=production \
    NODE_OPTIONS="--max-old-space-size=160 --max-semi-space-size=2" \
    GLIBC_TUNABLES="glibc.malloc.arena_max=1:glibc.malloc.trim_threshold=131072"
WORKDIR /app
# Owned by root and read-only to uid 1000: the process cannot rewrite its own code.
COPY --from=deps /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
COPY package.json ./
USER node
EXPOSE 8080 9090
# No curl in slim images: node asks /healthz on the admin port (following ADMIN_LISTEN if set).
HEALTHCHECK --interval=15s --timeout=3s --start-period=10s --retries=3 \
  CMD ["node", "-e", "const l=process.env.ADMIN_LISTEN||'0.0.0.0:9090';const i=l.lastIndexOf(':');let h=l.slice(0,i).replace(/^\\[|\\]$/g,'');if(h===''||h==='0.0.0.0'||h==='::')h='127.0.0.1';fetch('http://'+(h.includes(':')?'['+h+']':h)+':'+l.slice(i+1)+'/healthz',{signal:AbortSignal.timeout(2500)}).then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"]
ENTRYPOINT ["node", "--no-allocation-site-pretenuring", "--liftoff-only", "dist/main.js"]
