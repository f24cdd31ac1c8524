-- schema_grants --
-- Privileges on the charter schema itself, owner excluded.
SELECT coalesce(r.rolname, 'PUBLIC') AS grantee, acl.privilege_type
FROM pg_namespace n, aclexplode(n.nspacl) AS acl
LEFT JOIN pg_roles r ON r.oid = acl.grantee
WHERE n.nspname = 'charter' AND acl.grantee <> n.nspowner
ORDER BY 1, 2

-- schema_columns --
-- Every column of every charter table, in table then column order.
SELECT c.relname, a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull,
       pg_get_expr(d.adbin, d.adrelid), a.attidentity
FROM pg_attribute a
JOIN pg_class c ON c.oid = a.attrelid
JOIN pg_namespace n ON n.oid = c.relnamespace
LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
WHERE n.nspname = 'charter' AND c.relkind IN ('r', 'p') AND a.attnum > 0 AND NOT a.attisdropped
ORDER BY c.relname, a.attnum

-- schema_constraints --
-- Table constraints by table and name (NOT NULL is shown on the column).
SELECT c.relname, con.conname, pg_get_constraintdef(con.oid)
FROM pg_constraint con
JOIN pg_class c ON c.oid = con.conrelid
JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = 'charter' AND con.contype <> 'n'
ORDER BY c.relname, con.conname

-- schema_indexes --
-- Indexes that do not back a primary key, unique or exclusion constraint.
SELECT t.relname, pg_get_indexdef(i.indexrelid)
FROM pg_index i
JOIN pg_class c ON c.oid = i.indexrelid
JOIN pg_class t ON t.oid = i.indrelid
JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = 'charter'
  AND NOT EXISTS (
      SELECT 1 FROM pg_constraint con
      WHERE con.conindid = i.indexrelid AND con.contype IN ('p', 'u', 'x')
  )
ORDER BY t.relname, c.relname

-- schema_triggers --
-- User-defined triggers by table and name.
SELECT c.relname, pg_get_triggerdef(t.oid)
FROM pg_trigger t
JOIN pg_class c ON c.oid = t.tgrelid
JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = 'charter' AND NOT t.tgisinternal
ORDER BY c.relname, t.tgname

-- schema_table_grants --
-- Table privileges by table, grantee and privilege, owner excluded.
SELECT c.relname, coalesce(r.rolname, 'PUBLIC'), acl.privilege_type
FROM pg_class c
JOIN pg_namespace n ON n.oid = c.relnamespace,
LATERAL aclexplode(coalesce(c.relacl, acldefault('r', c.relowner))) AS acl
LEFT JOIN pg_roles r ON r.oid = acl.grantee
WHERE n.nspname = 'charter' AND c.relkind IN ('r', 'p') AND acl.grantee <> c.relowner
ORDER BY 1, 2, 3

-- schema_column_grants --
-- Column privileges by table, grantee, privilege and column.
SELECT c.relname, coalesce(r.rolname, 'PUBLIC'), acl.privilege_type, a.attname
FROM pg_attribute a
JOIN pg_class c ON c.oid = a.attrelid
JOIN pg_namespace n ON n.oid = c.relnamespace,
LATERAL aclexplode(a.attacl) AS acl
LEFT JOIN pg_roles r ON r.oid = acl.grantee
WHERE n.nspname = 'charter' AND a.attacl IS NOT NULL AND a.attnum > 0
ORDER BY 1, 2, 3, a.attnum

-- schema_functions --
-- Every charter function's signature and full definition.
SELECT p.oid::regprocedure::text, pg_get_functiondef(p.oid)
FROM pg_proc p
JOIN pg_namespace n ON n.oid = p.pronamespace
WHERE n.nspname = 'charter'
ORDER BY 1

-- schema_function_grants --
-- Function EXECUTE privileges, the implicit PUBLIC default included, owner excluded.
SELECT p.oid::regprocedure::text, coalesce(r.rolname, 'PUBLIC'), acl.privilege_type
FROM pg_proc p
JOIN pg_namespace n ON n.oid = p.pronamespace,
LATERAL aclexplode(coalesce(p.proacl, acldefault('f', p.proowner))) AS acl
LEFT JOIN pg_roles r ON r.oid = acl.grantee
WHERE n.nspname = 'charter' AND acl.grantee <> p.proowner
ORDER BY 1, 2, 3
