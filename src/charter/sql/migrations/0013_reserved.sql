-- A placeholder: migration number 0013 belongs to another branch of this session, and
-- the runner refuses a gap. At merge, the real 0013 replaces this file.
SELECT 1
