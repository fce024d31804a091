DROP TABLE actor_timers;
