// SPDX-License-Identifier: MIT OR Apache-2.0
// Applies migrations/ to the test D1 database; only unapplied ones run, so
// running this before every test file is safe.
import { applyD1Migrations } from "cloudflare:test";
import { env } from "cloudflare:workers";

await applyD1Migrations(env.DB, env.TEST_MIGRATIONS);
