-- Entities that live with another entity than their id says (several nodes
-- on one PostgreSQL): the legs of transfers made before leg keys took their
-- own form have UUID keys, which name no transfer, yet a leg must live on
-- its transfer's node. Rows are only added, never changed, so every node
-- reads the same routes.
CREATE TABLE cluster_routes (
    kind TEXT NOT NULL,
    entity_id TEXT NOT NULL,
    -- What the entity's slot is computed from in place of its id.
    route_key TEXT NOT NULL,
    PRIMARY KEY (kind, entity_id)
);
