import { Config, Effect, Redacted } from "effect"

/** Every environment knob of the service, typed; secrets stay `Redacted`. */
export class AppConfig extends Effect.Service<AppConfig>()("tapedeck/AppConfig", {
  effect: Effect.gen(function*() {
    return {
      port: yield* Config.integer("PORT").pipe(Config.withDefault(8080)),
      databaseUrl: yield* Config.option(Config.redacted("DATABASE_URL")),
      dataDir: yield* Config.string("TAPEDECK_DATA_DIR").pipe(Config.withDefault("./.tapedeck")),
      dbPoolMax: yield* Config.integer("TAPEDECK_DB_POOL_MAX").pipe(Config.withDefault(10)),
      apiKeys: yield* Config.redacted("TAPEDECK_API_KEYS").pipe(Config.withDefault(Redacted.make(""))),
      jwtSecret: yield* Config.option(Config.redacted("TAPEDECK_JWT_SECRET")),
      jwtIssuer: yield* Config.option(Config.string("TAPEDECK_JWT_ISSUER")),
      jwtAudience: yield* Config.option(Config.string("TAPEDECK_JWT_AUDIENCE")),
      rateLimitPerMinute: yield* Config.integer("TAPEDECK_RATE_LIMIT_PER_MINUTE").pipe(Config.withDefault(1200)),
      maxBodyBytes: yield* Config.integer("TAPEDECK_MAX_BODY_BYTES").pipe(Config.withDefault(16 * 1024 * 1024)),
      ingestMaxInflight: yield* Config.integer("TAPEDECK_INGEST_MAX_INFLIGHT").pipe(Config.withDefault(8)),
      // A 2000-span GenAI export is ~5 MB; decoding is what costs memory, so the cap stays near that.
      ingestMaxDecompressedBytes: yield* Config.integer("TAPEDECK_INGEST_MAX_DECOMPRESSED_BYTES").pipe(
        Config.withDefault(16 * 1024 * 1024)
      ),
      enforcementTimeoutMs: yield* Config.integer("TAPEDECK_ENFORCEMENT_TIMEOUT_MS").pipe(Config.withDefault(250)),
      replayInlineMaxModelCalls: yield* Config.integer("TAPEDECK_REPLAY_INLINE_MAX_MODEL_CALLS").pipe(Config.withDefault(8)),
      replayTimeoutSeconds: yield* Config.integer("TAPEDECK_REPLAY_TIMEOUT_SECONDS").pipe(Config.withDefault(900)),
      replaySdkGraceSeconds: yield* Config.integer("TAPEDECK_REPLAY_SDK_GRACE_SECONDS").pipe(Config.withDefault(30)),
      replayMonthlyAllowance: yield* Config.integer("TAPEDECK_REPLAY_MONTHLY_ALLOWANCE").pipe(Config.withDefault(100)),
      retentionDaysDeleted: yield* Config.number("TAPEDECK_RETENTION_DAYS_DELETED").pipe(Config.withDefault(30)),
      retentionIntervalSeconds: yield* Config.number("TAPEDECK_RETENTION_INTERVAL_SECONDS").pipe(
        Config.withDefault(3600)
      ),
      jobMaxAttempts: yield* Config.integer("TAPEDECK_JOB_MAX_ATTEMPTS").pipe(Config.withDefault(5)),
      jobBackoffMs: yield* Config.integer("TAPEDECK_JOB_BACKOFF_MS").pipe(Config.withDefault(1000)),
      jobPollMs: yield* Config.integer("TAPEDECK_JOB_POLL_MS").pipe(Config.withDefault(500)),
      jobLeaseSeconds: yield* Config.integer("TAPEDECK_JOB_LEASE_SECONDS").pipe(Config.withDefault(300)),
      commit: yield* Config.option(Config.string("TAPEDECK_COMMIT")),
      buildTime: yield* Config.option(Config.string("TAPEDECK_BUILD_TIME")),
      deploymentId: yield* Config.option(Config.string("TAPEDECK_DEPLOYMENT_ID"))
    } as const
  })
}) {}

