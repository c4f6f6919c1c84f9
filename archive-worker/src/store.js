// SPDX-License-Identifier: MIT OR Apache-2.0
// The archive's storage: blobs in R2 (binding PROFILES), the index in D1
// (binding DB, table `profiles`). Readers always find a blob through its D1
// row, and a row only ever names a blob that was completely written, so a
// blob without a row is invisible. See README.md, "Upload ordering".

import { HttpError } from "./http.js";

const UPSERT = `
INSERT INTO profiles (project, sha, branch, size, uploaded_at, blob_key)
VALUES (?1, ?2, ?3, ?4, ?5, ?6)
ON CONFLICT (project, sha) DO UPDATE SET
    branch = excluded.branch,
    size = excluded.size,
    uploaded_at = excluded.uploaded_at,
    blob_key = excluded.blob_key`;

const SELECT_KEY = "SELECT blob_key FROM profiles WHERE project = ?1 AND sha = ?2";

const SELECT_ROW =
	"SELECT project, sha, branch, size, uploaded_at, blob_key FROM profiles WHERE project = ?1 AND sha = ?2";

// Newest first: upload time, then the greater SHA (as lowercase text).
const SELECT_LATEST = `
SELECT project, sha, branch, size, uploaded_at, blob_key FROM profiles
WHERE project = ?1 AND branch = ?2
ORDER BY uploaded_at DESC, sha DESC LIMIT 1`;

const LIST_ALL = `
SELECT project, sha, branch, size, uploaded_at FROM profiles
WHERE project = ?1
ORDER BY uploaded_at DESC, sha DESC LIMIT ?2`;

const LIST_BRANCH = `
SELECT project, sha, branch, size, uploaded_at FROM profiles
WHERE project = ?1 AND branch = ?3
ORDER BY uploaded_at DESC, sha DESC LIMIT ?2`;

/** The public description of an upload, as the API returns it. */
export function describe(row) {
	return {
		project: row.project,
		sha: row.sha,
		branch: row.branch,
		size: row.size,
		uploaded_at: new Date(row.uploaded_at).toISOString(),
	};
}

async function deleteQuietly(env, key) {
	try {
		await env.PROFILES.delete(key);
	} catch (err) {
		// An undeleted blob without a row costs storage but is never served.
		console.error(`archive: could not delete orphan blob ${key}: ${err?.message}`);
	}
}

/**
 * Stores `bytes` as the profile of (project, sha), replacing any earlier
 * upload of that SHA. Order: (1) write the blob under a key unique to this
 * upload, (2) in one D1 transaction read the key being replaced and upsert
 * the row naming the new blob, (3) delete the replaced blob. A failure in
 * (1) leaves no row; in (2) the old row stays as it was; in (3) an orphan
 * blob that no reader can reach. `now` returns milliseconds since the epoch.
 */
export async function putProfile(env, { project, sha, branch, bytes }, now = Date.now) {
	const key = `${project}/${sha}/${crypto.randomUUID()}`;
	await env.PROFILES.put(key, bytes, {
		httpMetadata: { contentType: "application/octet-stream" },
	});

	const uploadedAt = now();
	let replaced = null;
	try {
		const [previous] = await env.DB.batch([
			env.DB.prepare(SELECT_KEY).bind(project, sha),
			env.DB.prepare(UPSERT).bind(project, sha, branch, bytes.byteLength, uploadedAt, key),
		]);
		replaced = previous.results.length > 0 ? previous.results[0].blob_key : null;
	} catch (err) {
		// Remove the new blob only when the index certainly does not name it:
		// a failure reported after a commit must not leave a row without blob.
		const current = await env.DB.prepare(SELECT_KEY)
			.bind(project, sha)
			.first("blob_key")
			.catch(() => key);
		if (current !== key) await deleteQuietly(env, key);
		throw err;
	}
	if (replaced !== null && replaced !== key) await deleteQuietly(env, replaced);

	return describe({ project, sha, branch, size: bytes.byteLength, uploaded_at: uploadedAt });
}

/**
 * Reads the row found by `findRow` and its blob. A concurrent re-upload may
 * delete the blob between the two reads; then the row is read again. Returns
 * null when there is no row.
 */
async function openThroughIndex(env, findRow) {
	let lastKey = null;
	for (let attempt = 0; attempt < 4; attempt++) {
		const row = await findRow();
		if (row === null) return null;
		if (row.blob_key === lastKey) {
			throw new HttpError(500, "the index names a blob that is missing from storage");
		}
		const object = await env.PROFILES.get(row.blob_key);
		if (object !== null) return { row, object };
		lastKey = row.blob_key;
	}
	throw new HttpError(503, "the profile kept being replaced while it was read; retry", {
		"retry-after": "1",
	});
}

/** The upload of (project, sha) with its blob, or null. */
export function openBySha(env, project, sha) {
	return openThroughIndex(env, () => env.DB.prepare(SELECT_ROW).bind(project, sha).first());
}

/** The newest upload on (project, branch) with its blob, or null. */
export function openLatest(env, project, branch) {
	return openThroughIndex(env, () => env.DB.prepare(SELECT_LATEST).bind(project, branch).first());
}

/** Up to `limit` uploads of `project` (on `branch` when not null), newest first. */
export async function listProfiles(env, project, branch, limit) {
	const statement =
		branch === null
			? env.DB.prepare(LIST_ALL).bind(project, limit)
			: env.DB.prepare(LIST_BRANCH).bind(project, limit, branch);
	const { results } = await statement.all();
	return results.map(describe);
}
