import { describe, expect, test } from "bun:test"
import { ConfigProvider, Effect, Layer } from "effect"
import { AppConfig } from "#layers/config/AppConfig"
import { CheckPressure } from "#layers/enforcement/CheckPressure"

const withEnv = (env: Record<string, string>) =>
  Layer.setConfigProvider(ConfigProvider.fromMap(new Map(Object.entries(env))))

const shedMs = (env: Record<string, string>) =>
  Effect.runSync(
    Effect.map(AppConfig, (c) => c.enforcementShedIngestMs).pipe(
      Effect.provide(AppConfig.Default),
      Effect.provide(withEnv(env))
    )
  )

const pressure = (env: Record<string, string>) =>
  Effect.runSync(CheckPressure.pipe(Effect.provide(CheckPressure.Default), Effect.provide(withEnv(env))))

describe("CheckPressure", () => {
  test("the threshold: a fifth of the check deadline on PostgreSQL, off on embedded PGlite, as set when set", () => {
    expect(shedMs({ DATABASE_URL: "postgres://x/y" })).toBe(50)
    expect(shedMs({ DATABASE_URL: "postgres://x/y", TAPEDECK_ENFORCEMENT_TIMEOUT_MS: "1000" })).toBe(200)
    expect(shedMs({})).toBe(0)
    expect(shedMs({ TAPEDECK_ENFORCEMENT_SHED_INGEST_MS: "7" })).toBe(7)
    expect(shedMs({ DATABASE_URL: "postgres://x/y", TAPEDECK_ENFORCEMENT_SHED_INGEST_MS: "0" })).toBe(0)
  })

  test("a few slow checks shed nothing; sustained slow checks do; slow ones among many prompt ones do not", () => {
    const few = pressure({ TAPEDECK_ENFORCEMENT_SHED_INGEST_MS: "10" })
    for (let i = 0; i < 15; i++) few.observe(500)
    expect(few.active()).toBe(false)
    few.observe(500)
    expect(few.active()).toBe(true)

    const mixed = pressure({ TAPEDECK_ENFORCEMENT_SHED_INGEST_MS: "10" })
    for (let i = 0; i < 40; i++) mixed.observe(0)
    for (let i = 0; i < 30; i++) mixed.observe(500)
    expect(mixed.active()).toBe(false)

    const off = pressure({})
    for (let i = 0; i < 100; i++) off.observe(10_000)
    expect(off.active()).toBe(false)
  })
})
