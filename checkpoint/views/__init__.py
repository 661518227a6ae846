"""A checkpoint's views: the schemas and row-group transforms of its DataFrame views
(:mod:`.schemas`), stored row groups as view rows (:mod:`.rows`), the metadata view
(:mod:`.metadata`) and where a state's weight lies (:mod:`.stats`)."""
