-- SPDX-License-Identifier: MIT OR Apache-2.0
-- The archive index: one row per (project, sha). A row only ever names a blob
-- that was fully written to R2 before the row was inserted or replaced.
CREATE TABLE profiles (
    project     TEXT    NOT NULL,
    sha         TEXT    NOT NULL,   -- lowercase hex, 7 to 64 digits
    branch      TEXT    NOT NULL,
    size        INTEGER NOT NULL,   -- bytes of the stored blob
    uploaded_at INTEGER NOT NULL,   -- server time, milliseconds since the epoch
    blob_key    TEXT    NOT NULL,   -- R2 key, unique per upload
    PRIMARY KEY (project, sha)
);

-- "latest of branch" and the list filtered by branch, newest first.
CREATE INDEX profiles_by_branch ON profiles (project, branch, uploaded_at DESC, sha DESC);

-- The unfiltered list, newest first.
CREATE INDEX profiles_by_time ON profiles (project, uploaded_at DESC, sha DESC);
