import { Config, Effect, LogLevel, Option, Redacted } from "effect"
import { optionalBaseUrl } from "./BaseUrl.ts"

/** TAPEDECK_ENFORCEMENT_SHED_INGEST_LAG_MS on PostgreSQL (docs/enforcement.md, "Checks first under overload"). */
const DEFAULT_SHED_INGEST_LAG_MS = 2

const nonBlank = (name: string) =>
  Config.option(Config.string(name)).pipe(Config.map(Option.filter((s) => s.trim() !== "")))

const optionalSecret = (name: string) =>
  Config.option(Config.redacted(name)).pipe(Config.map(Option.filter((key) => Redacted.value(key) !== "")))

/** The OpenAI-compatible chat provider (layers/llm/OpenAiCompatibleLlm.ts); no base URL: not configured. */
const LlmSettings = Config.all({
  baseUrl: optionalBaseUrl("TAPEDECK_LLM_BASE_URL"),
  apiKey: optionalSecret("TAPEDECK_LLM_API_KEY"),
  defaultModel: nonBlank("TAPEDECK_LLM_MODEL").pipe(Config.map(Option.getOrUndefined)),
  timeoutMs: Config.integer("TAPEDECK_LLM_TIMEOUT_MS").pipe(
    Config.validate({ message: "must be a positive number of milliseconds", validation: (n) => n > 0 }),
    Config.withDefault(60_000)
  ),
  maxRetries: Config.integer("TAPEDECK_LLM_MAX_RETRIES").pipe(
    Config.validate({ message: "must be 0 or more", validation: (n) => n >= 0 }),
    Config.withDefault(2)
  ),
  retryBaseMs: Config.integer("TAPEDECK_LLM_RETRY_BASE_MS").pipe(
    Config.validate({ message: "must be 0 or more milliseconds", validation: (n) => n >= 0 }),
    Config.withDefault(500)
  )
})

/** The OpenAI-compatible embeddings provider (layers/search/OpenAiEmbedder.ts); no base URL: the offline embedder. */
const EmbeddingsSettings = Config.all({
  baseUrl: optionalBaseUrl("TAPEDECK_EMBEDDINGS_BASE_URL"),
  model: Config.string("TAPEDECK_EMBEDDINGS_MODEL").pipe(Config.withDefault("text-embedding-3-small")),
  apiKey: optionalSecret("TAPEDECK_EMBEDDINGS_API_KEY"),
  dimensions: Config.option(
    Config.integer("TAPEDECK_EMBEDDINGS_DIMENSIONS").pipe(
      Config.validate({ message: "must be a positive integer", validation: (n) => n > 0 })
    )
  ),
  batchSize: Config.integer("TAPEDECK_EMBEDDINGS_BATCH_SIZE").pipe(
    Config.validate({ message: "must be between 1 and 2048", validation: (n) => n >= 1 && n <= 2048 }),
    Config.withDefault(64)
  ),
  timeoutMs: Config.integer("TAPEDECK_EMBEDDINGS_TIMEOUT_MS").pipe(
    Config.validate({ message: "must be a positive number of milliseconds", validation: (n) => n > 0 }),
    Config.withDefault(30_000)
  ),
  maxRetries: Config.integer("TAPEDECK_EMBEDDINGS_MAX_RETRIES").pipe(
    Config.validate({ message: "must be 0 or more", validation: (n) => n >= 0 }),
    Config.withDefault(2)
  )
})
export type EmbeddingsSettings = Config.Config.Success<typeof EmbeddingsSettings>

/**
 * How the process logs. Read apart from AppConfig, before it: an invalid setting elsewhere is then reported in the
 * configured format.
 */
export const LoggingConfig = Config.all({
  level: Config.logLevel("TAPEDECK_LOG_LEVEL").pipe(Config.withDefault(LogLevel.Info)),
  format: Config.literal("logfmt", "json", "pretty")("TAPEDECK_LOG_FORMAT").pipe(Config.withDefault("logfmt" as const))
})

/** Every environment knob of the service, typed; secrets stay `Redacted`. */
export class AppConfig extends Effect.Service<AppConfig>()("tapedeck/AppConfig", {
  effect: Effect.gen(function* () {
    return {
      port: yield* Config.integer("PORT").pipe(Config.withDefault(8080)),
      host: yield* Config.string("HOST").pipe(Config.withDefault("0.0.0.0")),
      // API processes on one port (a supervisor starts them); needs DATABASE_URL (embedded PGlite is one process).
      workers: yield* Config.integer("TAPEDECK_WORKERS").pipe(Config.withDefault(1)),
      // Which of the supervisor's API processes this is (src/app/Supervisor.ts sets it); none in a single process.
      workerIndex: yield* Config.option(Config.integer("TAPEDECK_WORKER_INDEX")),
      // OTLP/gRPC on a port of its own (src/grpc/OtlpGrpc.ts); no port set: the default 4317, which another
      // process may hold.
      otlpGrpc: {
        enabled: yield* Config.boolean("TAPEDECK_OTLP_GRPC_ENABLED").pipe(Config.withDefault(true)),
        port: yield* Config.option(
          Config.integer("TAPEDECK_OTLP_GRPC_PORT").pipe(
            Config.validate({ message: "must be a port (0 to 65535)", validation: (n) => n >= 0 && n <= 65535 })
          )
        )
      },
      /** How long a stopping instance lets the requests in flight finish before the app closes under them. */
      drainSeconds: yield* Config.number("TAPEDECK_DRAIN_SECONDS").pipe(
        Config.withDefault(10),
        Config.validate({
          message: "TAPEDECK_DRAIN_SECONDS must be between 0 and 3600",
          validation: (n) => n >= 0 && n <= 3600
        })
      ),
      databaseUrl: yield* Config.option(Config.redacted("DATABASE_URL")),
      dataDir: yield* Config.string("TAPEDECK_DATA_DIR").pipe(Config.withDefault("./.tapedeck")),
      pgliteSharedBuffers: yield* Config.option(
        Config.string("TAPEDECK_PGLITE_SHARED_BUFFERS").pipe(
          Config.validate({
            message: "must be a size such as 256MB, 1GB or 65536kB",
            validation: (s) => /^[1-9][0-9]*(kB|MB|GB)$/.test(s)
          })
        )
      ),
      dbPoolMax: yield* Config.integer("TAPEDECK_DB_POOL_MAX").pipe(Config.withDefault(10)),
      dbConnectTimeoutMs: yield* Config.integer("TAPEDECK_DB_CONNECT_TIMEOUT_MS").pipe(Config.withDefault(5000)),
      dbPreparedStatements: yield* Config.boolean("TAPEDECK_DB_PREPARED_STATEMENTS").pipe(Config.withDefault(true)),
      apiKeys: yield* Config.redacted("TAPEDECK_API_KEYS").pipe(Config.withDefault(Redacted.make(""))),
      jwtSecret: yield* Config.option(Config.redacted("TAPEDECK_JWT_SECRET")),
      jwtIssuer: yield* Config.option(Config.string("TAPEDECK_JWT_ISSUER")),
      jwtAudience: yield* Config.option(Config.string("TAPEDECK_JWT_AUDIENCE")),
      rateLimitPerMinute: yield* Config.integer("TAPEDECK_RATE_LIMIT_PER_MINUTE").pipe(Config.withDefault(1200)),
      maxBodyBytes: yield* Config.integer("TAPEDECK_MAX_BODY_BYTES").pipe(Config.withDefault(16 * 1024 * 1024)),
      ingestMaxInflight: yield* Config.integer("TAPEDECK_INGEST_MAX_INFLIGHT").pipe(
        Config.validate({ message: "must be at least 1", validation: (n) => n >= 1 }),
        Config.withDefault(8)
      ),
      // A request body must arrive whole within the deadline, and after the grace period at no less than the
      // minimum rate on average, else 408 (src/http/BodyLimit.ts): a slow upload holds nothing for long.
      bodyDeadlineMs: yield* Config.integer("TAPEDECK_BODY_DEADLINE_MS").pipe(
        Config.validate({ message: "must be 100 to 600000", validation: (n) => n >= 100 && n <= 600_000 }),
        Config.withDefault(10_000)
      ),
      bodyGraceMs: yield* Config.integer("TAPEDECK_BODY_GRACE_MS").pipe(
        Config.validate({ message: "must be 0 to 600000", validation: (n) => n >= 0 && n <= 600_000 }),
        Config.withDefault(1000)
      ),
      bodyMinBytesPerSecond: yield* Config.integer("TAPEDECK_BODY_MIN_BYTES_PER_SECOND").pipe(
        Config.validate({ message: "must be 0 or more (0 turns the rate check off)", validation: (n) => n >= 0 }),
        Config.withDefault(16 * 1024)
      ),
      // A 2000-span GenAI export is ~5 MB; decoding is what costs memory, so the cap stays near that.
      ingestMaxDecompressedBytes: yield* Config.integer("TAPEDECK_INGEST_MAX_DECOMPRESSED_BYTES").pipe(
        Config.withDefault(16 * 1024 * 1024)
      ),
      // Large protobuf exports are decoded, mapped and encoded for COPY on a thread of their own (PostgreSQL only).
      ingestPrepareThread: yield* Config.boolean("TAPEDECK_INGEST_PREPARE_THREAD").pipe(Config.withDefault(true)),
      // That thread's nice value (Linux): background work beside the request thread, where checks are answered.
      ingestPrepareThreadNice: yield* Config.integer("TAPEDECK_INGEST_PREPARE_THREAD_NICE").pipe(
        Config.validate({
          message: "must be 0 to 19 (0 leaves the thread as it is)",
          validation: (n) => n >= 0 && n <= 19
        }),
        Config.withDefault(10)
      ),
      enforcementTimeoutMs: yield* Config.integer("TAPEDECK_ENFORCEMENT_TIMEOUT_MS").pipe(Config.withDefault(250)),
      // Enforcement checks have their own admission: a pool of their own on PostgreSQL (beside TAPEDECK_DB_POOL_MAX;
      // 0: none, checks share that pool), and at most this many batch statements of checks in flight per instance
      // (layers/enforcement/CheckBatcher.ts): two, so that one slow statement does not hold every check up
      // (docs/performance.md, "Figures behind choices in the code").
      enforcementDbConnections: yield* Config.integer("TAPEDECK_ENFORCEMENT_DB_CONNECTIONS").pipe(
        Config.validate({ message: "must be 0 to 64", validation: (n) => n >= 0 && n <= 64 }),
        Config.withDefault(4)
      ),
      enforcementConcurrency: yield* Config.integer("TAPEDECK_ENFORCEMENT_CONCURRENCY").pipe(
        Config.validate({ message: "must be 1 to 64", validation: (n) => n >= 1 && n <= 64 }),
        Config.withDefault(2)
      ),
      // Checks that keep waiting longer than this in the queue for a lane (many of them within a second,
      // layers/enforcement/CheckPressure.ts) make ingestion refuse new exports (503) for a second; 0: never. By default
      // a fifth of TAPEDECK_ENFORCEMENT_TIMEOUT_MS: a check that waits that long for a lane still has most of its
      // deadline for its statement, and when checks keep waiting past it they are heading for their deadline (failing
      // closed), so ingestion steps aside before that, not after. Off by default on embedded PGlite: checks and exports
      // share its one connection there, and refusing exports cannot give checks a connection of their own.
      enforcementShedIngestMs: yield* Config.all({
        explicit: Config.option(
          Config.integer("TAPEDECK_ENFORCEMENT_SHED_INGEST_MS").pipe(
            Config.validate({ message: "must be 0 or more", validation: (n) => n >= 0 })
          )
        ),
        timeoutMs: Config.integer("TAPEDECK_ENFORCEMENT_TIMEOUT_MS").pipe(Config.withDefault(250)),
        embedded: Config.option(Config.string("DATABASE_URL")).pipe(Config.map((url) => url._tag === "None"))
      }).pipe(
        Config.map(({ embedded, explicit, timeoutMs }) =>
          explicit._tag === "Some" ? explicit.value : embedded ? 0 : Math.max(1, Math.floor(timeoutMs / 5))
        )
      ),
      // While enforcement checks come and the event loop runs later than this on average (layers/platform/EventLoopLag.ts),
      // ingestion refuses new exports (503) for a quarter of a second at a time; 0: never. Off by default on embedded
      // PGlite, as TAPEDECK_ENFORCEMENT_SHED_INGEST_MS is.
      enforcementShedIngestLagMs: yield* Config.all({
        explicit: Config.option(
          Config.number("TAPEDECK_ENFORCEMENT_SHED_INGEST_LAG_MS").pipe(
            Config.validate({ message: "must be 0 or more", validation: (n) => n >= 0 })
          )
        ),
        embedded: Config.option(Config.string("DATABASE_URL")).pipe(Config.map((url) => url._tag === "None"))
      }).pipe(
        Config.map(({ embedded, explicit }) =>
          explicit._tag === "Some" ? explicit.value : embedded ? 0 : DEFAULT_SHED_INGEST_LAG_MS
        )
      ),
      replayInlineMaxModelCalls: yield* Config.integer("TAPEDECK_REPLAY_INLINE_MAX_MODEL_CALLS").pipe(
        Config.withDefault(8)
      ),
      replayTimeoutSeconds: yield* Config.integer("TAPEDECK_REPLAY_TIMEOUT_SECONDS").pipe(Config.withDefault(900)),
      replaySdkGraceSeconds: yield* Config.integer("TAPEDECK_REPLAY_SDK_GRACE_SECONDS").pipe(Config.withDefault(30)),
      replayMonthlyAllowance: yield* Config.integer("TAPEDECK_REPLAY_MONTHLY_ALLOWANCE").pipe(Config.withDefault(100)),
      retentionDaysDeleted: yield* Config.number("TAPEDECK_RETENTION_DAYS_DELETED").pipe(Config.withDefault(30)),
      retentionIntervalSeconds: yield* Config.number("TAPEDECK_RETENTION_INTERVAL_SECONDS").pipe(
        Config.withDefault(3600)
      ),
      // Days traces are kept after they started, for accounts without a setting of their own (unset: until deleted).
      retentionDays: yield* Config.option(
        Config.integer("TAPEDECK_RETENTION_DAYS").pipe(
          Config.validate({ message: "must be 1 to 36500", validation: (n) => n >= 1 && n <= 36500 })
        )
      ).pipe(Config.map((o) => (o._tag === "Some" ? o.value : null))),
      retentionBatchTraces: yield* Config.integer("TAPEDECK_RETENTION_BATCH_TRACES").pipe(
        Config.validate({ message: "must be 1 or more", validation: (n) => n >= 1 }),
        Config.withDefault(50)
      ),
      // After each batch of the retention purge, a pause of this many times the batch's duration (0: none).
      retentionPauseRatio: yield* Config.number("TAPEDECK_RETENTION_PAUSE_RATIO").pipe(
        Config.validate({ message: "must be 0 to 100", validation: (n) => n >= 0 && n <= 100 }),
        Config.withDefault(3)
      ),
      contentSweepGraceSeconds: yield* Config.number("TAPEDECK_CONTENT_SWEEP_GRACE_SECONDS").pipe(
        Config.validate({ message: "must be 0 or more", validation: (n) => n >= 0 }),
        Config.withDefault(3600)
      ),
      contentConversionBatch: yield* Config.integer("TAPEDECK_CONTENT_CONVERSION_BATCH").pipe(
        Config.validate({ message: "must be 1 or more", validation: (n) => n >= 1 }),
        Config.withDefault(500)
      ),
      defaultJudgeModel: yield* Config.string("TAPEDECK_DEFAULT_JUDGE_MODEL").pipe(
        Config.validate({
          message: "must be 1 to 100 characters",
          validation: (s) => s.trim() !== "" && s.length <= 100
        }),
        Config.withDefault("gpt-4o-mini")
      ),
      evalGateConcurrency: yield* Config.integer("TAPEDECK_EVAL_GATE_CONCURRENCY").pipe(
        Config.validate({ message: "must be 1 to 64", validation: (n) => n >= 1 && n <= 64 }),
        Config.withDefault(8)
      ),
      llm: yield* LlmSettings,
      embeddings: yield* EmbeddingsSettings,
      // JSON of model prices over the built-in table (layers/llm/Prices.ts, which validates it), for estimated span
      // costs; the file's under the variable's.
      modelPrices: yield* nonBlank("TAPEDECK_MODEL_PRICES"),
      modelPricesFile: yield* Config.option(
        Config.string("TAPEDECK_MODEL_PRICES_FILE").pipe(
          Config.validate({ message: "must be a file path", validation: (s) => s.trim() !== "" })
        )
      ),
      jobMaxAttempts: yield* Config.integer("TAPEDECK_JOB_MAX_ATTEMPTS").pipe(Config.withDefault(5)),
      jobBackoffMs: yield* Config.integer("TAPEDECK_JOB_BACKOFF_MS").pipe(Config.withDefault(1000)),
      jobPollMs: yield* Config.integer("TAPEDECK_JOB_POLL_MS").pipe(Config.withDefault(500)),
      jobLeaseSeconds: yield* Config.integer("TAPEDECK_JOB_LEASE_SECONDS").pipe(Config.withDefault(300)),
      jobDeferSeconds: yield* Config.number("TAPEDECK_JOB_DEFER_SECONDS").pipe(
        Config.validate({ message: "must be 0 to 3600", validation: (n) => n >= 0 && n <= 3600 }),
        Config.withDefault(30)
      ),
      // Terminal-trace detection (insights) and eval-rule webhooks.
      insightLoopRepeats: yield* Config.integer("TAPEDECK_INSIGHT_LOOP_REPEATS").pipe(Config.withDefault(3)),
      insightBaselineFactor: yield* Config.number("TAPEDECK_INSIGHT_BASELINE_FACTOR").pipe(Config.withDefault(3)),
      insightBaselineMinSample: yield* Config.integer("TAPEDECK_INSIGHT_BASELINE_MIN_SAMPLE").pipe(
        Config.withDefault(10)
      ),
      insightBaselineWindow: yield* Config.integer("TAPEDECK_INSIGHT_BASELINE_WINDOW").pipe(Config.withDefault(100)),
      insightTokenFactor: yield* Config.number("TAPEDECK_INSIGHT_TOKEN_FACTOR").pipe(Config.withDefault(10)),
      insightTokenCap: yield* Config.integer("TAPEDECK_INSIGHT_TOKEN_CAP").pipe(Config.withDefault(200_000)),
      webhookTimeoutMs: yield* Config.integer("TAPEDECK_WEBHOOK_TIMEOUT_MS").pipe(Config.withDefault(10_000)),
      webhookMaxAttempts: yield* Config.integer("TAPEDECK_WEBHOOK_MAX_ATTEMPTS").pipe(Config.withDefault(6)),
      webhookBackoffMs: yield* Config.integer("TAPEDECK_WEBHOOK_BACKOFF_MS").pipe(Config.withDefault(10_000)),
      webhookRunWaitSeconds: yield* Config.integer("TAPEDECK_WEBHOOK_RUN_WAIT_SECONDS").pipe(Config.withDefault(3600)),
      webhookSecretKey: yield* Config.option(Config.redacted("TAPEDECK_WEBHOOK_SECRET_KEY")),
      webhookCaFile: yield* Config.option(Config.string("TAPEDECK_WEBHOOK_CA_FILE")),
      /** Test-only: lets webhooks reach loopback addresses (every other blocked range stays blocked). */
      webhookAllowLoopbackForTests: yield* Config.boolean("TAPEDECK_WEBHOOK_ALLOW_LOOPBACK_FOR_TESTS").pipe(
        Config.withDefault(false)
      ),
      // Live span stream (layers/stream, src/http/StreamSocket.ts).
      streamQueueMax: yield* Config.integer("TAPEDECK_STREAM_QUEUE_MAX").pipe(Config.withDefault(1000)),
      streamReplayMax: yield* Config.integer("TAPEDECK_STREAM_REPLAY_MAX").pipe(Config.withDefault(10_000)),
      streamRetentionSeconds: yield* Config.number("TAPEDECK_STREAM_RETENTION_SECONDS").pipe(Config.withDefault(600)),
      streamPingSeconds: yield* Config.number("TAPEDECK_STREAM_PING_SECONDS").pipe(Config.withDefault(15)),
      streamAuthTimeoutMs: yield* Config.integer("TAPEDECK_STREAM_AUTH_TIMEOUT_MS").pipe(Config.withDefault(5000)),
      // OAuth discovery metadata (src/http/DiscoveryHttp.ts): absolute http(s) URLs, no trailing slash kept.
      publicUrl: yield* Config.option(
        Config.string("TAPEDECK_PUBLIC_URL").pipe(
          Config.validate({
            message: "must be an absolute http(s) URL",
            validation: (s) => /^https?:\/\/[^\s/?#]+/i.test(s)
          }),
          Config.map((s) => s.replace(/\/+$/, ""))
        )
      ),
      authUrl: yield* Config.option(
        Config.string("TAPEDECK_AUTH_URL").pipe(
          Config.validate({
            message: "must be an absolute http(s) URL",
            validation: (s) => /^https?:\/\/[^\s/?#]+/i.test(s)
          }),
          Config.map((s) => s.replace(/\/+$/, ""))
        )
      ),
      // Logs: one line per request only when asked for; otherwise a summary line per period (0: none).
      accessLog: yield* Config.boolean("TAPEDECK_ACCESS_LOG").pipe(Config.withDefault(false)),
      logSummarySeconds: yield* Config.number("TAPEDECK_LOG_SUMMARY_SECONDS").pipe(
        Config.validate({ message: "must be 0 to 86400", validation: (n) => n >= 0 && n <= 86_400 }),
        Config.withDefault(60)
      ),
      commit: yield* Config.option(Config.string("TAPEDECK_COMMIT")),
      buildTime: yield* Config.option(Config.string("TAPEDECK_BUILD_TIME")),
      deploymentId: yield* Config.option(Config.string("TAPEDECK_DEPLOYMENT_ID")),
      // The service's own telemetry (layers/telemetry/Tracing.ts): OTLP/HTTP to this endpoint; unset: none.
      telemetryEndpoint: yield* Config.option(Config.string("OTEL_EXPORTER_OTLP_ENDPOINT")),
      telemetryServiceName: yield* Config.string("OTEL_SERVICE_NAME").pipe(Config.withDefault("tapedeck"))
    } as const
  })
}) {}
