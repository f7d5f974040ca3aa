import { StrictMode } from "react"
import { createRoot } from "react-dom/client"
import { App } from "./shell/App.tsx"
import "./styles.css"

performance.mark("studio:modules-evaluated")
createRoot(document.getElementById("root")!).render(
  <StrictMode>
    <App />
  </StrictMode>
)
