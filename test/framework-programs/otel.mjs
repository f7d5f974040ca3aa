// What every framework program shares: where the model and Tapedeck are (from the environment the test or the
// recorder sets), the tool, the question, and an OpenTelemetry SDK exporting OTLP/JSON to Tapedeck.
import { OTLPTraceExporter } from "@opentelemetry/exporter-trace-otlp-http"
import { resourceFromAttributes } from "@opentelemetry/resources"
import { BatchSpanProcessor } from "@opentelemetry/sdk-trace-base"
import { NodeTracerProvider } from "@opentelemetry/sdk-trace-node"

const required = (name) => {
  const value = process.env[name]
  if (value === undefined || value === "") throw new Error(`${name} is not set`)
  return value
}

/** The fake model's base URL (`http://127.0.0.1:<port>/v1`). */
export const modelUrl = () => required("MODEL_URL")
/** Tapedeck's base URL; spans go to `<it>/v1/traces`. */
export const otlpUrl = () => required("OTLP_URL")
export const otlpHeaders = () => ({ "x-service-key": required("TAPEDECK_KEY") })
export const MODEL = "gpt-4o-mini"
export const QUESTION = "What is the weather in Lisbon?"
export const weather = ({ city }) => `sunny, 21°C in ${city}`

/** A registered tracer provider exporting to Tapedeck; `shutdown()` flushes it. */
export const tracing = (serviceName) => {
  const provider = new NodeTracerProvider({
    resource: resourceFromAttributes({ "service.name": serviceName }),
    spanProcessors: [new BatchSpanProcessor(new OTLPTraceExporter({ url: `${otlpUrl()}/v1/traces`, headers: otlpHeaders() }))]
  })
  provider.register()
  return provider
}
