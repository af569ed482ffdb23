"""``ctrlz run``: one protected session, its snapshot triggers and its sandbox."""
