-- community_pharmacy_prescription_manageme_b6d84d0897: Community Pharmacy Prescription Management
CREATE TABLE patients (patient_id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, age INTEGER CHECK (age >= 0)) STRICT;

CREATE TABLE medications (medication_id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, brand TEXT, dosage TEXT, frequency TEXT, quantity REAL CHECK (quantity > 0), stock REAL) STRICT;

CREATE TABLE allergies (allergy_id INTEGER PRIMARY KEY, patient_id INTEGER NOT NULL REFERENCES patients(patient_id), medication_id INTEGER NOT NULL REFERENCES medications(medication_id), reaction TEXT) STRICT;

CREATE TABLE prescriptions (prescription_id INTEGER PRIMARY KEY, patient_id INTEGER NOT NULL REFERENCES patients(patient_id), medication_id INTEGER NOT NULL REFERENCES medications(medication_id), quantity REAL CHECK (quantity > 0), date TEXT NOT NULL) STRICT;

CREATE TABLE cancel_prescriptions (cancel_id INTEGER PRIMARY KEY, prescription_id INTEGER NOT NULL REFERENCES prescriptions(prescription_id), reason TEXT) STRICT;
