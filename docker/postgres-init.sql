-- The dr-toolkit ledger database beside Airflow's metadata database.
CREATE USER drt WITH PASSWORD 'drt';
CREATE DATABASE drt OWNER drt;
