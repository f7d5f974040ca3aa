import { Otlp } from "@effect/opentelemetry"
import { FetchHttpClient } from "@effect/platform"
import { Config, Effect, Layer, Option } from "effect"
import pkg from "../../package.json" with { type: "json" }

/** Where the service's own telemetry goes (OTLP/HTTP); unset: nowhere. */
export const selfTelemetryEndpoint = Config.option(Config.string("OTEL_EXPORTER_OTLP_ENDPOINT"))

/**
 * Exports the service's own traces, logs and metrics over OTLP/HTTP JSON when OTEL_EXPORTER_OTLP_ENDPOINT is
 * set; nothing otherwise. Never point it at this service's own /v1/traces: it would ingest itself.
 */
export const TracingLive = Layer.unwrapEffect(
  Effect.gen(function*() {
    const endpoint = yield* selfTelemetryEndpoint
    const serviceName = yield* Config.string("OTEL_SERVICE_NAME").pipe(Config.withDefault("tapedeck"))
    return Option.match(endpoint, {
      onNone: () => Layer.setTracerEnabled(false),
      onSome: (baseUrl) =>
        Otlp.layerJson({ baseUrl, resource: { serviceName, serviceVersion: pkg.version } }).pipe(
          Layer.provide(FetchHttpClient.layer)
        )
    })
  })
)
