-- Applied once by `berth db migrate`. Applied migrations are never edited: change the schema with
-- the next number, such as 0002_add_tags.sql.
CREATE TABLE notes (
  id INTEGER PRIMARY KEY,
  body TEXT NOT NULL,
  created_at TEXT NOT NULL DEFAULT (datetime('now'))
);
