// Command compare drives Chronicle and DBOS Transact Go with the same
// harness on the same PostgreSQL server: see README.md.
package main
