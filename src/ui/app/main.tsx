import { StrictMode } from "react"
import { createRoot } from "react-dom/client"
import { App } from "./shell/App.tsx"
import "./styles.css"

// For profiling page loads: when the bundle's modules have run (the benchmark reads the timeline around it).
performance.mark("studio:modules-evaluated")
createRoot(document.getElementById("root")!).render(
  <StrictMode>
    <App />
  </StrictMode>
)
