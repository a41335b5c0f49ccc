-- Search attributes (issue 23). attrs holds an instance record's
-- attributes as one JSON object, each value tagged with its type so that
-- the round trip is exact and a comparison never meets a value of
-- another type:
--   {"customer": {"k": "c-17"}, "items": {"i": 3}, "amount": {"f": 12.5},
--    "gift": {"b": true}, "due": {"t": 1767225600000000},
--    "tags": {"l": ["a", "b"]}}
-- k keyword, i int (a JSON number, exact to int64), f float (the shortest
-- decimal that reads back as the same float64), b bool, t time (microseconds
-- since 1970-01-01 UTC), l keyword list. NULL when the record has none.
ALTER TABLE {{schema}}.instances ADD COLUMN attrs jsonb;
-- The custom status when it was set as a string: what queries compare.
ALTER TABLE {{schema}}.instances ADD COLUMN custom_status_text text;
-- Equality, IN and "list holds" of any attribute are containment
-- (attrs @> '{"customer": {"k": "c-17"}}'), which this index serves. It
-- leaves out instances without attributes, which then cost it nothing.
CREATE INDEX instances_attrs ON {{schema}}.instances USING gin (attrs jsonb_path_ops) WHERE attrs IS NOT NULL;
-- ListCustomProjections pages through one projection's records by
-- instance id.
CREATE INDEX custom_projections_name ON {{schema}}.custom_projections (name, instance_id);
