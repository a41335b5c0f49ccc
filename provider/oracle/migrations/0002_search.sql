-- Chronicle schema for Oracle, version 2: search attributes and the custom
-- status text of instance records (see 0001_init.sql for the markers).

-- The custom status set as a string: custom_status_text keeps it exactly;
-- custom_status_key holds it for queries when it fits in 4,000 bytes (a
-- longer text has no value for queries).
ALTER TABLE {{obj:INSTANCES}} ADD (
    custom_status_text CLOB,
    custom_status_key  VARCHAR2(4000 BYTE)
)
/
CREATE INDEX {{obj:INSTANCES_CREATED}} ON {{obj:INSTANCES}} (status, created_at)
/
-- One row per attribute value of an instance record, one per element of a
-- list (pos numbers them). vtype is the query.Type; keywords and list
-- elements are in str behind a one-character tag ('k'), so that an empty
-- keyword is a value (Oracle keeps '' as NULL) and byte order and
-- prefixes are kept; ints, booleans (0, 1) and times (Unix microseconds)
-- in num; floats in dbl, exactly.
CREATE TABLE {{obj:ATTRIBUTES}} (
    instance_id VARCHAR2(512 BYTE) NOT NULL,
    name        VARCHAR2(64 BYTE) NOT NULL,
    pos         NUMBER(5) NOT NULL,
    vtype       NUMBER(2) NOT NULL,
    str         VARCHAR2(1100 BYTE),
    num         NUMBER(19),
    dbl         BINARY_DOUBLE,
    CONSTRAINT {{name:ATTRIBUTES_PK}} PRIMARY KEY (instance_id, name, pos)
)
/
-- A term on an attribute is an EXISTS on this table by name and value:
-- these indexes find the instances of a value (or range) without reading
-- the instances table.
CREATE INDEX {{obj:ATTRIBUTES_STR}} ON {{obj:ATTRIBUTES}} (name, str, instance_id)
/
CREATE INDEX {{obj:ATTRIBUTES_NUM}} ON {{obj:ATTRIBUTES}} (name, num, instance_id)
/
CREATE INDEX {{obj:ATTRIBUTES_DBL}} ON {{obj:ATTRIBUTES}} (name, dbl, instance_id)
/
