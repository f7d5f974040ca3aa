import { Otlp } from "@effect/opentelemetry"
import { FetchHttpClient } from "@effect/platform"
import { Effect, Layer, Option } from "effect"
import pkg from "../../package.json" with { type: "json" }
import { AppConfig } from "../config/AppConfig.ts"

/**
 * Exports the service's own traces, logs and metrics over OTLP/HTTP JSON when OTEL_EXPORTER_OTLP_ENDPOINT is
 * set; nothing otherwise. Never point it at this service's own /v1/traces: it would ingest itself.
 */
export const TracingLive = Layer.unwrapEffect(
  Effect.gen(function*() {
    const { telemetryEndpoint, telemetryServiceName: serviceName } = yield* AppConfig
    return Option.match(telemetryEndpoint, {
      onNone: () => Layer.setTracerEnabled(false),
      onSome: (baseUrl) =>
        Otlp.layerJson({ baseUrl, resource: { serviceName, serviceVersion: pkg.version } }).pipe(
          Layer.provide(FetchHttpClient.layer)
        )
    })
  })
)
