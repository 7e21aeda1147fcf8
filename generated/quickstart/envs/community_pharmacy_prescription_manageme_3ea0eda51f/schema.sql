-- community_pharmacy_prescription_manageme_3ea0eda51f: Community Pharmacy Prescription Management
CREATE TABLE patients (patient_id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, age INTEGER CHECK (age >= 0), gender TEXT NOT NULL CHECK (gender IN ('male', 'female')), ethnicity TEXT NOT NULL, religion TEXT NOT NULL, nationality TEXT NOT NULL, marital_status TEXT NOT NULL, disability TEXT NOT NULL, pregnancy TEXT NOT NULL) STRICT;

CREATE TABLE prescriptions ( prescription_id INTEGER PRIMARY KEY, patient_id INTEGER NOT NULL REFERENCES patients(patient_id), medication_name TEXT NOT NULL UNIQUE, dosage TEXT NOT NULL, frequency TEXT NOT NULL, start_date TEXT NOT NULL, end_date TEXT NOT NULL CHECK (end_date >= start_date)) STRICT;

CREATE TABLE orders (order_id INTEGER PRIMARY KEY, patient_id INTEGER NOT NULL REFERENCES patients(patient_id), medication_name TEXT NOT NULL UNIQUE, quantity INTEGER CHECK (quantity > 0), order_date TEXT NOT NULL) STRICT;

CREATE TABLE events (event_id INTEGER PRIMARY KEY, patient_id INTEGER NOT NULL REFERENCES patients(patient_id), event_type TEXT NOT NULL CHECK (event_type IN ('visit', 'prescription')), event_date TEXT NOT NULL) STRICT;
