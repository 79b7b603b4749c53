"""What people read: terminal tables (:mod:`.text`, :mod:`.profile_table`), plots (:mod:`.plots`) and the
validation report files (:mod:`.validation`)."""
