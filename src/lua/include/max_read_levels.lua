-- Included by the read-write scripts that loop over read levels (rw_read_release.lua,
-- rw_write_release.lua, rw_write_acquire.lua, rw_renew.lua; rw_read_acquire.lua refuses a re-entry past
-- it). A hold count is a number in the hash, not a measure of the
-- keys behind it: '99999999999' is eleven bytes. A script looks at no more than `max_levels` timeout
-- keys per call, so that no value in the hash can keep the server busy (Java loops over whatever
-- count it finds). redlease never nests a read hold deeper than that (read_protocol::max_levels in
-- src/lock/protocols.cpp, which must say the same).
local max_levels = 1000
