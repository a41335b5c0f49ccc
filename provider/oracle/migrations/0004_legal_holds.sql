-- Chronicle schema for Oracle, version 4: legal holds (see 0001_init.sql
-- for the markers). Every statement may run again after a cut-short run:
-- an object already there is skipped by the migrator.

-- One row per held instance, kept apart from the instance's row (whose
-- record every round rewrites). A hold is placed under the lock of the
-- instance's row, and a purge (which locks that row FOR UPDATE SKIP
-- LOCKED) refuses an instance that has one, so the two are atomic with
-- each other. placed_at is Unix nanoseconds.
CREATE TABLE {{obj:LEGAL_HOLDS}} (
    instance_id VARCHAR2(512 BYTE) NOT NULL,
    hold_id     VARCHAR2(512 BYTE) NOT NULL,
    reason      CLOB,
    actor       VARCHAR2(1000 BYTE),
    ticket      VARCHAR2(1000 BYTE),
    placed_at   NUMBER(19) NOT NULL,
    CONSTRAINT {{name:LEGAL_HOLDS_PK}} PRIMARY KEY (instance_id)
)
/
