// SPDX-License-Identifier: MIT OR Apache-2.0
// Response helpers. Every error leaves the worker as JSON {"error": "..."};
// messages name the parameter or header at fault and never echo a token.

/** An error that maps directly onto an HTTP answer. */
export class HttpError extends Error {
	/**
	 * @param {number} status HTTP status code
	 * @param {string} message text for the JSON "error" field
	 * @param {Record<string, string>} [headers] extra response headers
	 */
	constructor(status, message, headers = {}) {
		super(message);
		this.status = status;
		this.headers = headers;
	}
}

/** A JSON answer; the archive's answers are never cached by intermediaries. */
export function jsonResponse(status, value, headers = {}) {
	return new Response(JSON.stringify(value), {
		status,
		headers: {
			"content-type": "application/json",
			"cache-control": "no-store",
			...headers,
		},
	});
}

export function errorResponse(err) {
	return jsonResponse(err.status, { error: err.message }, err.headers);
}
