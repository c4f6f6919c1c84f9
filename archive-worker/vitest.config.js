// SPDX-License-Identifier: MIT OR Apache-2.0
// Tests run inside workerd through @cloudflare/vitest-pool-workers, with the
// bindings of wrangler.toml (local R2 and D1) and test-only secrets.
import path from "node:path";
import { cloudflareTest, readD1Migrations } from "@cloudflare/vitest-pool-workers";
import { defineConfig } from "vitest/config";

export default defineConfig(async () => {
	const migrations = await readD1Migrations(path.join(import.meta.dirname, "migrations"));
	return {
		plugins: [
			cloudflareTest({
				wrangler: { configPath: "./wrangler.toml" },
				miniflare: {
					bindings: {
						AUTH_TOKEN: "test-write-token",
						READ_TOKEN: "test-read-token",
						MAX_BODY_BYTES: "4096",
						TEST_MIGRATIONS: migrations,
					},
				},
			}),
		],
		test: {
			setupFiles: ["./test/apply-migrations.js"],
		},
	};
});
