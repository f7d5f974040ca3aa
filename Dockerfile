# The Tapedeck API on the official Bun image.
FROM oven/bun:1.4.5 AS deps
WORKDIR /app
COPY package.json bun.lock* package-lock.json* ./
RUN bun install --production --frozen-lockfile || bun install --production

FROM oven/bun:1.4.5
WORKDIR /app
# MIMALLOC_PURGE_DELAY=-1: keep freed memory for reuse (see docs/configuration.md).
ENV NODE_ENV=production PORT=8080 HOST=0.0.0.0 MIMALLOC_PURGE_DELAY=-1
COPY --from=deps /app/node_modules ./node_modules
COPY package.json tsconfig.json README.md ./
COPY docs ./docs
COPY src ./src
COPY layers ./layers
# Tapedeck Studio's bundle, built into the image (the app directory is not writable by the `bun` user at run time).
RUN bun src/ui/server/build.ts
USER bun
EXPOSE 8080 4317
HEALTHCHECK --interval=10s --timeout=3s --start-period=20s --retries=3 \
  CMD bun -e "fetch('http://127.0.0.1:' + (process.env.PORT ?? 8080) + '/health').then((r) => process.exit(r.ok ? 0 : 1)).catch(() => process.exit(1))"
CMD ["bun", "src/app/main.ts"]
