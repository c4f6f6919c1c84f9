// SPDX-License-Identifier: MIT OR Apache-2.0
// Reading an upload body under a byte cap. The archive never parses a
// profile; it only checks the gzip magic so that a wrong file is refused
// before it can become some branch's "latest".

import { HttpError } from "./http.js";

function tooLarge(maxBytes) {
	return new HttpError(413, `body larger than the limit of ${maxBytes} bytes`);
}

function notGzip() {
	return new HttpError(400, "body is not gzip (expected a .pb.gz profile starting with 1f 8b)");
}

/**
 * Returns the whole body as one Uint8Array of at most maxBytes bytes.
 * A declared Content-Length over the limit is refused before reading; the
 * streamed size is counted as well, since the header may be absent (chunked)
 * or wrong. Throws 413 over the limit and 400 for an empty or non-gzip body.
 */
export async function readProfileBody(request, maxBytes) {
	const declared = request.headers.get("content-length");
	if (declared !== null) {
		if (!/^[0-9]+$/.test(declared.trim())) {
			throw new HttpError(400, "bad Content-Length header");
		}
		if (Number(declared.trim()) > maxBytes) throw tooLarge(maxBytes);
	}
	if (request.body === null) throw notGzip();

	const reader = request.body.getReader();
	const chunks = [];
	let total = 0;
	const head = [];
	for (;;) {
		const { done, value } = await reader.read();
		if (done) break;
		const chunk = value instanceof Uint8Array ? value : new Uint8Array(value);
		total += chunk.byteLength;
		if (total > maxBytes) {
			chunks.length = 0;
			await discardRest(reader);
			throw tooLarge(maxBytes);
		}
		chunks.push(chunk);
		if (head.length < 2) {
			for (let i = 0; i < chunk.byteLength && head.length < 2; i++) head.push(chunk[i]);
			if (head.length === 2 && (head[0] !== 0x1f || head[1] !== 0x8b)) {
				await discardRest(reader);
				throw notGzip();
			}
		}
	}
	if (head.length < 2) throw notGzip();
	return concat(chunks, total);
}

/**
 * Reads a refused body to its end and drops it, so the answer only goes out
 * once the client has sent everything. Under `wrangler dev`, a chunked body
 * that the worker began to read and then abandoned (by cancel() or by
 * releasing the reader alike) wedges the local proxy: its next request hangs
 * until the client gives up, or answers 503 "Your worker restarted
 * mid-request". A body never touched, and one read to its end, do not; so a
 * refusal decided from the headers reads nothing, and one decided while
 * reading reads on. No byte is kept, so memory stays flat; the worker sets
 * no bound of its own: Cloudflare's request size limit bounds the body when
 * deployed (README.md, "Errors").
 */
async function discardRest(reader) {
	try {
		for (;;) {
			const { done } = await reader.read();
			if (done) return;
		}
	} catch {
		// The client went away; there is nothing left to drain.
	}
}

function concat(chunks, total) {
	if (chunks.length === 1) return chunks[0];
	const out = new Uint8Array(total);
	let at = 0;
	for (const chunk of chunks) {
		out.set(chunk, at);
		at += chunk.byteLength;
	}
	return out;
}
