// SPDX-License-Identifier: MIT OR Apache-2.0
// A tiny HTTP server that misbehaves on cue, for the archive client tests.
// It binds 127.0.0.1 on an ephemeral port, records every request (method,
// URL, headers, body size, arrival time) and answers each one with the next
// step of a plan the test sets; when the plan is empty it repeats
// `fallback`. Dependency-free (node:http only).
//
// Steps:
//   { status, headers?, body? }          an ordinary answer
//   { status, dropAfter, totalBytes }    promise totalBytes, send dropAfter of
//                                        them, then cut the connection
//   { delayMs, ...step }                 wait first (a slow server)
//   { hang: true }                       never answer
//
// Run directly (`node misbehaving_server.mjs`) it answers 503 to everything
// and prints "PORT <n>" on stdout, for poking at the client by hand.

import http from "node:http";
import https from "node:https";
import { pathToFileURL } from "node:url";

function act(step, req, res) {
	if (step.hang) return;
	const send = () => {
		if (res.destroyed) return;
		if (step.dropAfter !== undefined) {
			res.writeHead(step.status ?? 200, {
				"content-type": "application/octet-stream",
				"content-length": String(step.totalBytes),
			});
			res.write(Buffer.alloc(step.dropAfter, 0x1f));
			// Let the partial body leave, then cut the connection.
			setTimeout(() => res.socket?.destroy(), 50);
			return;
		}
		const body =
			step.body === undefined ? "" : Buffer.isBuffer(step.body) ? step.body : String(step.body);
		res.writeHead(step.status, {
			"content-length": String(Buffer.byteLength(body)),
			...(step.headers ?? {}),
		});
		res.end(body);
	};
	if (step.delayMs) setTimeout(send, step.delayMs).unref();
	else send();
}

/**
 * Starts the server, speaking HTTPS when `tls` holds { key, cert } (PEM).
 * Returns { port, url, plan, requests, setFallback(step), reset(), close() };
 * `plan` is an array the test fills with steps.
 */
export async function startServer({ tls = null } = {}) {
	const state = {
		plan: [],
		requests: [],
		fallback: { status: 500, body: '{"error":"no step planned"}' },
	};
	const onRequest = (req, res) => {
		const chunks = [];
		let size = 0;
		req.on("data", (c) => {
			chunks.push(c);
			size += c.length;
		});
		req.on("end", () => {
			state.requests.push({
				method: req.method,
				url: req.url,
				headers: { ...req.headers },
				rawHeaders: [...req.rawHeaders],
				bodyBytes: size,
				body: Buffer.concat(chunks),
				at: performance.now(),
			});
			try {
				act(state.plan.length ? state.plan.shift() : state.fallback, req, res);
			} catch (err) {
				// A step node refuses to send (say, a bad header) fails the test fast.
				console.error(`misbehaving_server: cannot answer: ${err.message}`);
				res.socket?.destroy();
			}
		});
	};
	const server = tls ? https.createServer(tls, onRequest) : http.createServer(onRequest);
	// A client that sends "Expect: 100-continue" lands here; answer it the
	// same way so the test sees (and fails on) the header rather than a hang.
	server.on("checkContinue", (req, res) => {
		res.writeContinue();
		onRequest(req, res);
	});
	const sockets = new Set();
	server.on("connection", (s) => {
		sockets.add(s);
		s.on("close", () => sockets.delete(s));
	});
	await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
	const { port } = server.address();
	return {
		port,
		url: `${tls ? "https" : "http"}://127.0.0.1:${port}`,
		get plan() {
			return state.plan;
		},
		requests: state.requests,
		setFallback(step) {
			state.fallback = step;
		},
		reset() {
			state.plan.length = 0;
			state.requests.length = 0;
			state.fallback = { status: 500, body: '{"error":"no step planned"}' };
		},
		close() {
			for (const s of sockets) s.destroy();
			return new Promise((resolve) => server.close(resolve));
		},
	};
}

if (import.meta.url === pathToFileURL(process.argv[1]).href) {
	const s = await startServer();
	s.setFallback({ status: 503, body: '{"error":"misbehaving on purpose"}' });
	console.log(`PORT ${s.port}`);
}
